"""A calendar's dates from an iCalendar (.ics) file of holidays, by a small hand parser.

What holiday files hold is a narrow part of RFC 5545: VEVENTs with an all-day ``DTSTART``
(``;VALUE=DATE:20301225``, or a date-time, whose date is taken) and an optional ``DTEND``
(exclusive) or ``DURATION`` of whole days, some with ``RRULE:FREQ=YEARLY`` (with ``UNTIL`` or
``COUNT``, ``INTERVAL=1``). That is what is read; an event with another recurrence
(``FREQ=MONTHLY``, ``BYDAY=4TH``...) is left out and named in a warning, never guessed at.
No dependency: no iCalendar library is installed with tickwork, and this is all it needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from tickwork.errors import ValidationError

MAX_EVENTS = 5000
MAX_EVENT_DAYS = 366
_DATE = re.compile(r"(\d{4})(\d{2})(\d{2})")
_DURATION_DAYS = re.compile(r"P(?:(\d+)W)?(?:(\d+)D)?(?:T.*)?")


@dataclass(frozen=True, slots=True)
class IcsImport:
    """The ``dates`` and ``yearly`` entries of a calendar document, and what was left out."""

    dates: list[Any]
    yearly: list[Any]
    warnings: list[str]
    events: int


def _unfold(text: str) -> list[tuple[int, str]]:
    """Content lines with their first line number; folded lines (a leading space) joined."""
    lines: list[tuple[int, str]] = []
    for number, raw in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1):
        if raw.startswith((" ", "\t")) and lines:
            lines[-1] = (lines[-1][0], lines[-1][1] + raw[1:])
        elif raw.strip():
            lines.append((number, raw))
    return lines


def _date_of(value: str, where: str) -> date:
    match = _DATE.match(value.strip())
    if match is None:
        raise ValidationError(where, f"'{value}' is not an iCalendar date (YYYYMMDD)")
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        raise ValidationError(where, f"'{value}' is not a valid date") from None


def parse_ics(text: str, source: str = "ics") -> IcsImport:
    """The dates of every VEVENT in ``text``. Errors name ``source`` and the line."""
    if "BEGIN:VCALENDAR" not in text.upper():
        raise ValidationError(source, "is not an iCalendar file (no BEGIN:VCALENDAR)")
    dates: list[Any] = []
    yearly: list[Any] = []
    warnings: list[str] = []
    event: dict[str, tuple[int, str, str]] | None = None
    events = 0
    for number, line in _unfold(text):
        name_part, colon, value = line.partition(":")
        if not colon:
            continue
        name, _, params = name_part.partition(";")
        name = name.strip().upper()
        if name == "BEGIN" and value.strip().upper() == "VEVENT":
            event = {}
        elif name == "END" and value.strip().upper() == "VEVENT" and event is not None:
            events += 1
            if events > MAX_EVENTS:
                raise ValidationError(source, f"has more than {MAX_EVENTS} events")
            _add_event(event, source, dates, yearly, warnings)
            event = None
        elif event is not None and name in ("DTSTART", "DTEND", "DURATION", "RRULE", "SUMMARY"):
            event[name] = (number, params, value.strip())
    return IcsImport(dates=dates, yearly=yearly, warnings=warnings, events=events)


def _add_event(event: dict[str, tuple[int, str, str]], source: str, dates: list[Any],
               yearly: list[Any], warnings: list[str]) -> None:
    summary = event.get("SUMMARY", (0, "", "(no summary)"))[2]
    if "DTSTART" not in event:
        warnings.append(f"event '{summary}' has no DTSTART: left out")
        return
    line, _, value = event["DTSTART"]
    first = _date_of(value, f"{source} line {line} DTSTART")
    days = 1
    if "DTEND" in event:
        end_line, _, end_value = event["DTEND"]
        end = _date_of(end_value, f"{source} line {end_line} DTEND")
        days = max(1, (end - first).days)  # DTEND is exclusive for all-day events
    elif "DURATION" in event:
        match = _DURATION_DAYS.fullmatch(event["DURATION"][2])
        if match is not None:
            days = max(1, int(match[1] or 0) * 7 + int(match[2] or 0))
    if days > MAX_EVENT_DAYS:
        warnings.append(f"event '{summary}' spans {days} days (more than {MAX_EVENT_DAYS}): "
                        "left out")
        return
    last = first + timedelta(days=days - 1)
    if "RRULE" not in event:
        dates.append(first.isoformat() if days == 1 else
                     {"from": first.isoformat(), "to": last.isoformat()})
        return
    rule = dict(part.partition("=")[::2] for part in event["RRULE"][2].upper().split(";"))
    supported = {"FREQ", "UNTIL", "COUNT", "INTERVAL", "WKST"}
    if (rule.get("FREQ") != "YEARLY" or set(rule) - supported
            or rule.get("INTERVAL", "1") != "1"):
        warnings.append(f"event '{summary}' (line {event['RRULE'][0]}) recurs by "
                        f"'{event['RRULE'][2]}', which is not read (only FREQ=YEARLY on its "
                        "date): left out")
        return
    until: date | None = None
    if "UNTIL" in rule:
        until = _date_of(rule["UNTIL"], f"{source} line {event['RRULE'][0]} RRULE UNTIL")
    elif "COUNT" in rule and rule["COUNT"].isdigit() and int(rule["COUNT"]) > 0:
        until = date(min(first.year + int(rule["COUNT"]) - 1, 9999), 12, 31)
    for offset in range(days):
        day = first + timedelta(days=offset)
        entry: dict[str, str] = {"on": f"{day.month:02d}-{day.day:02d}",
                                 "from": day.isoformat()}
        if until is not None:
            entry["until"] = (until + timedelta(days=offset)).isoformat()
        yearly.append(entry)
