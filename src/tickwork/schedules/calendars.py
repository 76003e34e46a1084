"""Named calendars: sets of dates, date ranges, yearly dates and weekly windows.

Pure code, as the rest of ``tickwork.schedules``. A calendar is judged on *local* readings:
the schedule that uses it converts its fire times to its own time zone first
(``tickwork.schedules.structured``). A calendar's document is the JSON shape the API, the CLI
and the dashboard send::

    {"name": "holidays", "description": "Public holidays",
     "dates": ["2030-12-24", {"from": "2030-08-01", "to": "2030-08-15"}],
     "yearly": ["01-01", {"on": "12-25", "from": "2020-12-25", "until": "2040-12-31"}],
     "weekly": ["Sat-Sun", "Fri 18:00 - Mon 06:00"]}

Dates and ranges are inclusive; a weekly window's end is exclusive. ``parse_calendar`` checks a
document and names the field of the first problem; ``calendar_document`` writes it back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from tickwork.errors import ValidationError

NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
NAME_RULE = "must be 1 to 64 letters, digits, '_', '.' or '-'"
MAX_ENTRIES = 5000  # dates, ranges, yearly dates and windows of one calendar, each
DESCRIPTION_MAX = 500
FIELDS = ("name", "description", "dates", "yearly", "weekly")
WEEK = 7 * 86_400
DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_WORDS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MAX_STEPS = 10_000  # exclusions chained back to back, followed at most this far

_WINDOW = re.compile(
    r"(?P<d1>[a-z]+)(?:\s+(?P<t1>\d{1,2}:\d{2}))?\s*(?:-\s*(?P<d2>[a-z]+)(?:\s+(?P<t2>\d{1,2}:\d{2}))?)?",
    re.IGNORECASE)
_MONTH_DAY = re.compile(r"(\d{2})-(\d{2})")


@dataclass(frozen=True, slots=True)
class WeeklyWindow:
    """From ``start`` to ``end`` (seconds from Monday 00:00; ``end`` exclusive, wrapping over
    Sunday night when it is not after ``start``), as ``text`` says."""

    start: int
    end: int
    text: str

    def covers(self, second: int) -> bool:
        if self.start < self.end:
            return self.start <= second < self.end
        return second >= self.start or second < self.end

    def remaining(self, second: int) -> int:
        """Seconds from ``second`` (covered) to the window's end."""
        return (self.end - second) % WEEK or WEEK

    def until_start(self, second: int) -> int:
        """Seconds from ``second`` to the window's next start (strictly later)."""
        return (self.start - second) % WEEK or WEEK


@dataclass(frozen=True, slots=True)
class YearlyDate:
    """``month``-``day`` every year, from ``first`` until ``last`` (dates, inclusive) if set."""

    month: int
    day: int
    first: date | None = None
    last: date | None = None

    def matches(self, d: date) -> bool:
        return (d.month == self.month and d.day == self.day
                and (self.first is None or d >= self.first)
                and (self.last is None or d <= self.last))


@dataclass(frozen=True, slots=True)
class Calendar:
    name: str
    description: str = ""
    dates: frozenset[date] = frozenset()
    ranges: tuple[tuple[date, date], ...] = ()
    yearly: tuple[YearlyDate, ...] = ()
    weekly: tuple[WeeklyWindow, ...] = ()

    def day_reason(self, d: date) -> str | None:
        """Why the whole of day ``d`` is in this calendar, or None."""
        if d in self.dates:
            return d.isoformat()
        for first, last in self.ranges:
            if first <= d <= last:
                return f"{first.isoformat()} to {last.isoformat()}"
        for entry in self.yearly:
            if entry.matches(d):
                return f"every year on {entry.month:02d}-{entry.day:02d}"
        return None

    def covers_day(self, d: date) -> bool:
        """Whether all of day ``d`` is in the calendar (what a business day must not be)."""
        if self.day_reason(d) is not None:
            return True
        start = d.weekday() * 86_400
        return any(w.covers(start) and w.remaining(start) >= 86_400 for w in self.weekly)

    def reason_at(self, local: datetime) -> str | None:
        """Why the local reading ``local`` is in this calendar, or None."""
        reason = self.day_reason(local.date())
        if reason is not None:
            return reason
        second = _second_of_week(local)
        for window in self.weekly:
            if window.covers(second):
                return f"weekly {window.text}"
        return None

    def free_from(self, local: datetime) -> datetime | None:
        """The first local reading at or after ``local`` that this calendar does not cover;
        None if it covers everything from there on (as far as it is followed)."""
        for _ in range(_MAX_STEPS):
            if self.day_reason(local.date()) is not None:
                local = datetime.combine(local.date() + timedelta(days=1), datetime.min.time())
                continue
            second = _second_of_week(local)
            covering = [w.remaining(second) for w in self.weekly if w.covers(second)]
            if not covering:
                return local
            local += timedelta(seconds=max(covering)) - timedelta(microseconds=local.microsecond)
        return None

    def next_start(self, local: datetime) -> datetime:
        """A local reading after ``local`` no later than the next time the calendar starts
        covering (the next midnight, or a weekly window's start if sooner)."""
        midnight = datetime.combine(local.date() + timedelta(days=1), datetime.min.time())
        second = _second_of_week(local)
        starts = [local.replace(microsecond=0) + timedelta(seconds=w.until_start(second))
                  for w in self.weekly]
        return min([midnight, *starts])


def _second_of_week(local: datetime) -> int:
    return local.weekday() * 86_400 + local.hour * 3600 + local.minute * 60 + local.second


# --- the document ---------------------------------------------------------------------------


def check_name(value: object, field: str = "name") -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise ValidationError(field, f"{NAME_RULE} (got {value!r})")
    return value


def parse_date(value: object, field: str) -> date:
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise ValidationError(field, f"must be a date such as 2030-12-25 (got {value!r})")


def parse_calendar(doc: object, *, name: str | None = None) -> Calendar:
    """A calendar from its document; ``name`` (from a URL or an argument) fills in a missing
    one, and must agree with the document's."""
    if not isinstance(doc, Mapping):
        raise ValidationError("", "the calendar must be a JSON object")
    for key in doc:
        if key not in FIELDS:
            raise ValidationError("", f"unknown field {key!r} (known: {', '.join(FIELDS)})")
    given = doc.get("name", name)
    if given is None:
        raise ValidationError("name", "is required")
    cal_name = check_name(given)
    if name is not None and cal_name != name:
        raise ValidationError("name", f"does not match the calendar's name {name!r}")
    description = doc.get("description", "")
    if not isinstance(description, str) or len(description) > DESCRIPTION_MAX:
        raise ValidationError("description", f"must be a string of at most {DESCRIPTION_MAX} "
                              "characters")
    dates: set[date] = set()
    ranges: list[tuple[date, date]] = []
    for index, item in enumerate(_items(doc, "dates")):
        field = f"dates[{index}]"
        if isinstance(item, Mapping):
            if set(item) != {"from", "to"}:
                raise ValidationError(field, "a range must have exactly 'from' and 'to'")
            first = parse_date(item["from"], f"{field}.from")
            last = parse_date(item["to"], f"{field}.to")
            if last < first:
                raise ValidationError(f"{field}.to", f"must not be before 'from' ({first})")
            ranges.append((first, last))
        else:
            dates.add(parse_date(item, field))
    yearly = tuple(_yearly(item, f"yearly[{index}]")
                   for index, item in enumerate(_items(doc, "yearly")))
    weekly = tuple(parse_window(item, f"weekly[{index}]")
                   for index, item in enumerate(_items(doc, "weekly")))
    return Calendar(name=cal_name, description=description, dates=frozenset(dates),
                    ranges=tuple(ranges), yearly=yearly, weekly=weekly)


def _items(doc: Mapping[str, Any], key: str) -> list[Any]:
    value = doc.get(key, [])
    if not isinstance(value, list):
        raise ValidationError(key, "must be an array")
    if len(value) > MAX_ENTRIES:
        raise ValidationError(key, f"must have at most {MAX_ENTRIES} entries (got {len(value)})")
    return value


def _yearly(item: object, field: str) -> YearlyDate:
    first = last = None
    text = item
    if isinstance(item, Mapping):
        unknown = set(item) - {"on", "from", "until"}
        if unknown or "on" not in item:
            raise ValidationError(field, "must be 'MM-DD' or an object with 'on' and "
                                  "optional 'from' and 'until' dates")
        text = item["on"]
        first = None if item.get("from") is None else parse_date(item["from"], f"{field}.from")
        last = None if item.get("until") is None else parse_date(item["until"], f"{field}.until")
        field = f"{field}.on"
    match = _MONTH_DAY.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValidationError(field, f"must be a month and day such as 12-25 (got {text!r})")
    month, day = int(match[1]), int(match[2])
    try:
        date(2000, month, day)  # a leap year: 02-29 is a yearly date (in leap years)
    except ValueError:
        raise ValidationError(field, f"{text} is not a day of the year") from None
    return YearlyDate(month, day, first, last)


def _day(text: str, field: str) -> int:
    key = text.lower()[:3]
    if key not in DAY_NAMES or not DAY_WORDS[DAY_NAMES.index(key)].lower().startswith(
            text.lower()):
        raise ValidationError(field, f"unknown day {text!r} (use Mon, Tue, ... Sun)")
    return DAY_NAMES.index(key)


def _minute(text: str | None, field: str) -> int:
    if text is None:
        return 0
    hour, minute = (int(part) for part in text.split(":"))
    if hour > 24 or minute > 59 or (hour == 24 and minute):
        raise ValidationError(field, f"{text} is not a time of day (00:00 to 24:00)")
    return hour * 60 + minute


def parse_window(value: object, field: str) -> WeeklyWindow:
    """``"Sat"``, ``"Sat-Sun"`` (whole days) or ``"Fri 18:00 - Mon 06:00"``."""
    match = _WINDOW.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValidationError(field, "must be a day ('Sat'), days ('Sat-Sun') or a span "
                              f"such as 'Fri 18:00 - Mon 06:00' (got {value!r})")
    assert isinstance(value, str)
    first = _day(match["d1"], field)
    last = first if match["d2"] is None else _day(match["d2"], field)
    start = first * 86_400 + _minute(match["t1"], field) * 60
    if match["t2"] is None and match["t1"] is None:  # whole days: to the end of the last
        end = (last + 1) * 86_400
    elif match["t2"] is None:
        raise ValidationError(field, "a window that starts at a time must end at one, as "
                              "'Fri 18:00 - Mon 06:00'")
    else:
        end = last * 86_400 + _minute(match["t2"], field) * 60
    if start == end % WEEK and match["d2"] is not None and match["t1"] is not None:
        raise ValidationError(field, "starts where it ends")
    return WeeklyWindow(start=start, end=end % WEEK if end != WEEK else WEEK,
                        text=" ".join(value.split()))


def calendar_document(cal: Calendar) -> dict[str, Any]:
    """The canonical document of ``cal``; ``parse_calendar`` reads it back."""
    dates: list[Any] = [d.isoformat() for d in sorted(cal.dates)]
    dates += [{"from": a.isoformat(), "to": b.isoformat()} for a, b in cal.ranges]
    yearly: list[Any] = []
    for y in cal.yearly:
        on = f"{y.month:02d}-{y.day:02d}"
        if y.first is None and y.last is None:
            yearly.append(on)
        else:
            entry: dict[str, str] = {"on": on}
            if y.first is not None:
                entry["from"] = y.first.isoformat()
            if y.last is not None:
                entry["until"] = y.last.isoformat()
            yearly.append(entry)
    return {"name": cal.name, "description": cal.description, "dates": dates,
            "yearly": yearly, "weekly": [w.text for w in cal.weekly]}
