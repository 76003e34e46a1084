"""Cron expressions in words: "at 03:00 every day", "on the second Friday of the month"."""

from __future__ import annotations

from tickwork.schedules.cron import MONTH, CronExpr, _is_star, parse_field
from tickwork.schedules.words import DAY_WORDS, MONTH_WORDS, clock, join, join_values


def describe(expr: CronExpr) -> str:
    """Plain English, best effort: "at 03:00 every day", "every 15 minutes"."""
    sec, minute, hour, dom, month, dow = expr.fields
    phrases = day_phrases(expr, dom, dow)
    days = " or ".join(f"on {phrase}" for phrase in phrases)
    month_values = sorted(parse_field(month, MONTH))
    months = "" if _is_star(month) else "in " + join_values(month_values, MONTH_WORDS, 1)
    if len(month_values) == 1 and len(phrases) == 1:  # "on January 1", "on the last day of
        name = MONTH_WORDS[month_values[0] - 1]          # February"
        if dom.isdigit() and _is_star(dow):
            days, months = f"on {name} {int(dom)}", ""
        elif phrases[0].endswith(" of the month"):
            days, months = f"on {phrases[0].removesuffix(' of the month')} of {name}", ""
    times = [(h, m, s) for h in expr._hours for m in expr._minutes for s in expr._seconds]
    if expr.fixed and len(times) <= 6:
        at = join([clock(*t) for t in times])
        when = f"at {at}" + ("" if days or months else " every day")
    else:
        when = _describe_times(expr, sec, minute, hour)
    return " ".join(part for part in (when, days, months, _describe_years(expr)) if part)

def _describe_years(expr: CronExpr) -> str:
    """"in 2027", "in the years 2027 through 2030", "every 2 years from 2026 through 2198"."""
    years = expr._years
    if years is None:
        return ""
    if len(years) == 1:
        return f"in {years[0]}"
    if "/" in expr.year_field and "," not in expr.year_field and len(years) > 2:
        return f"every {years[1] - years[0]} years from {years[0]} through {years[-1]}"
    return "in the years " + join_values(list(years))

def _describe_times(expr: CronExpr, sec: str, minute: str, hour: str) -> str:
    units = (("second", sec, expr._seconds), ("minute", minute, expr._minutes),
             ("hour", hour, expr._hours))
    finest = next((i for i, (_, _, vals) in enumerate(units) if len(vals) > 1), 2)
    unit, text, values = units[finest]
    if text == "*":
        phrase = f"every {unit}"
    elif text.startswith("*/") and text[2:].isdigit():
        step = int(text[2:])
        phrase = f"every {unit}" if step == 1 else f"every {step} {unit}s"
    else:
        phrase = f"at {unit}s {join_values(list(values))}" if len(values) > 1 \
            else f"at {unit} {values[0]}"
        if all(u[1] == "*" for u in units[finest + 1:]):
            phrase += f" of every {units[finest + 1][0]}" if finest < 2 else ""
    below = [(name, vals[0]) for name, _, vals in units[:finest] if vals[0] != 0]
    if below:
        phrase += " at " + " ".join(f"{name} {value}" for name, value in below)
    above = [f"{name}s {join_values(list(vals))}" if len(vals) > 1 else f"{name} {vals[0]}"
             for name, text, vals in units[finest + 1:] if text != "*"]
    return ", ".join([phrase, *above])

def day_phrases(expr: CronExpr, dom: str, dow: str) -> list[str]:
    """What each restricted day field selects: "days 1 and 15 of the month", "Friday",
    "the last day of the month", "the second Friday of the month"."""
    phrases = []
    if not _is_star(dom):
        values = [d for d in range(1, 32) if (expr._dom_mask >> d) & 1]
        items = [f"day{'s' if len(values) > 1 else ''} {join_values(values)}"] if values \
            else []
        items += [form.words() for form in expr._dom_forms]
        phrases.append(f"{join(items)} of the month")
    if not _is_star(dow):
        values = [d for d in range(7) if (expr._dow_mask >> d) & 1]
        items = [join_values(values, DAY_WORDS)] if values else []
        items += [form.words() for form in expr._dow_forms]
        phrases.append(join(items) + (" of the month" if expr._dow_forms else ""))
    return phrases
