"""Weekly and monthly rules, and schedules filtered by calendars.

Pure code. A rule is what cron cannot say::

    {"weekly": {"days": ["tue"], "at": "09:00", "interval": 2, "anchor": "2030-01-08"}}
    {"monthly": {"days": [15, "last"], "at": "18:00"}}
    {"monthly": {"business_day": 3, "at": "09:00"}}          the 3rd business day (-1: the last)
    {"monthly": {"business_days_before_end": 2, "at": "09:00"}}

Wall times are read in the schedule's time zone with the cron engine's rule for fixed times
(DESIGN G9): a time a DST change skips fires at the end of the gap, a repeated time at its first
instance. A business day is Monday to Friday, except the days the schedule's ``exclude``
calendars cover whole. ``CalendarSchedule`` drops the fire times of another schedule that its
``exclude`` calendars cover (or, with ``only``, that its ``only`` calendars do not).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from tickwork.errors import ValidationError
from tickwork.models import ScheduleSpec, utc
from tickwork.schedules import (
    EPOCH,
    ONE_SECOND,
    ONE_US,
    Schedule,
    _Bounded,  # the start_at/end_at/jitter every schedule type shares
    compile_schedule,
    load_zone,
)
from tickwork.schedules.calendars import DAY_NAMES, DAY_WORDS, Calendar, parse_date
from tickwork.schedules.cron import CronExpr
from tickwork.schedules.words import join

RULE_TYPES = ("weekly", "monthly")
MAX_TIMES = 24
FOLD_REACH = timedelta(hours=3)  # more than any zone's clocks go back at once
HORIZON_DAYS = 8 * 366  # as the cron engine: no fire time within 8 years means none
_SKIPS = 100_000
_ORDINALS = {1: "st", 2: "nd", 3: "rd"}
_WEEKLY_KEYS = ("days", "at", "interval", "anchor")
_MONTHLY_KEYS = ("days", "business_day", "business_days_before_end", "at")


def uses_calendars(spec: ScheduleSpec) -> bool:
    return bool(spec.exclude or spec.only)


# --- parsing --------------------------------------------------------------------------------


def _times(value: object, field: str) -> list[str]:
    items = value if isinstance(value, list) else [value]
    if not items or len(items) > MAX_TIMES:
        raise ValidationError(field, f"must be a time such as '09:00' or 1 to {MAX_TIMES} of them")
    out = set()
    for index, item in enumerate(items):
        where = field if not isinstance(value, list) else f"{field}[{index}]"
        parts = item.split(":") if isinstance(item, str) else []
        if (len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) == 2 for p in parts)
                or int(parts[0]) > 23 or int(parts[1]) > 59):
            raise ValidationError(where, f"must be a time of day HH:MM, 00:00 to 23:59 "
                                  f"(got {item!r})")
        out.add(item)
    return sorted(out)


def _int(value: object, field: str, low: int, high: int, *, zero: bool = True) -> int:
    if (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high
            or (value == 0 and not zero)):
        nonzero = ", not 0" if not zero and low < 0 else ""
        raise ValidationError(field, f"must be an integer from {low} to {high}{nonzero} "
                              f"(got {value!r})")
    return value


def parse_rule(kind: str, value: object, field: str) -> str:
    """The canonical JSON text of a weekly or monthly rule, or ValidationError naming the
    field (``schedule.weekly.days[1]``)."""
    if not isinstance(value, Mapping):
        raise ValidationError(field, "must be an object")
    keys = _WEEKLY_KEYS if kind == "weekly" else _MONTHLY_KEYS
    for key in value:
        if key not in keys:
            raise ValidationError(field, f"unknown field {key!r} (known: {', '.join(keys)})")
    if "at" not in value:
        raise ValidationError(f"{field}.at", "is required (a time such as '09:00')")
    rule = _weekly(value, field) if kind == "weekly" else _monthly(value, field)
    rule["at"] = _times(value["at"], f"{field}.at")
    return json.dumps(rule, sort_keys=True, separators=(",", ":"))


def _weekly(value: Mapping[str, Any], field: str) -> dict[str, Any]:
    days = value.get("days")
    if not isinstance(days, list) or not days:
        raise ValidationError(f"{field}.days", "must be a non-empty array of days "
                              "such as ['mon', 'thu']")
    found = set()
    for index, day in enumerate(days):
        key = day.lower()[:3] if isinstance(day, str) else ""
        if key not in DAY_NAMES or not DAY_WORDS[DAY_NAMES.index(key)].lower().startswith(
                day.lower()):
            raise ValidationError(f"{field}.days[{index}]",
                                  f"unknown day {day!r} (use mon, tue, ... sun)")
        found.add(DAY_NAMES.index(key))
    rule: dict[str, Any] = {"days": [DAY_NAMES[d] for d in sorted(found)],
                            "interval": _int(value.get("interval", 1), f"{field}.interval", 1, 52)}
    if "anchor" in value:
        rule["anchor"] = parse_date(value["anchor"], f"{field}.anchor").isoformat()
    return rule


def _monthly(value: Mapping[str, Any], field: str) -> dict[str, Any]:
    ways = [key for key in ("days", "business_day", "business_days_before_end")
            if key in value]
    if len(ways) != 1:
        raise ValidationError(field, "must have exactly one of 'days', 'business_day' "
                              "or 'business_days_before_end'")
    way = ways[0]
    if way == "days":
        return {"days": _month_days(value["days"], f"{field}.days")}
    if way == "business_day":
        return {way: _int(value[way], f"{field}.{way}", -23, 23, zero=False)}
    return {way: _int(value[way], f"{field}.{way}", 1, 22)}


def _month_days(value: object, field: str) -> list[int | str]:
    if not isinstance(value, list) or not value:
        raise ValidationError(field, "must be a non-empty array of days of the month "
                              "(1 to 31, 'last', or -1 to -31 from the end)")
    found: set[int] = set()
    for index, item in enumerate(value):
        number = -1 if item == "last" else _int(item, f"{field}[{index}]", -31, 31, zero=False)
        found.add(number)
    return ["last" if d == -1 else d for d in sorted(found, key=lambda d: (d < 0, d))]


def rule_document(spec: ScheduleSpec) -> dict[str, Any]:
    assert spec.rule is not None  # a weekly or monthly ScheduleSpec always has one
    return dict(json.loads(spec.rule))


# --- wall times -----------------------------------------------------------------------------


class _Wall:
    """Local readings to instants, with the cron engine's fixed-time DST rule (G9)."""

    def __init__(self, zone: ZoneInfo | None) -> None:
        self.zone = zone
        self._expr = None if zone is None else CronExpr("0 0 * * *", zone)

    def instant(self, local: datetime) -> datetime:
        if self._expr is None:
            return local.replace(tzinfo=UTC)
        wall = (local.replace(tzinfo=UTC) - EPOCH) // ONE_SECOND
        # _resolve_fixed is the engine's own G9 rule; reused here rather than written twice.
        found = self._expr._resolve_fixed(wall)
        return EPOCH + timedelta(seconds=found, microseconds=local.microsecond)

    def local(self, t: datetime) -> datetime:
        return (t if self.zone is None else t.astimezone(self.zone)).replace(tzinfo=None)

    def before_a_fold(self, t: datetime, target: datetime) -> datetime:
        """``target``, or sooner the instant the clocks go back, when they do within 3 hours
        after ``t``. A calendar skip judges readings, and the readings a fold shows again may
        be ones it never judged: a window from 02:30 does not cover the second 02:00-02:29,
        so a skip from 02:30 to the window's end must stop at the fold. (A fold more than its
        own length after ``t`` shows only readings the skip passed over, but stopping there
        costs one more look, nothing else.)"""
        if self.zone is None:
            return target
        end = min(target, t + FOLD_REACH)
        before = t.astimezone(self.zone).utcoffset()
        after = end.astimezone(self.zone).utcoffset()
        if before is None or after is None or after >= before:
            return target
        low, high = int(t.timestamp()), int(end.timestamp())  # no zone changes twice in 3 h
        while high - low > 1:
            mid = (low + high) // 2
            if datetime.fromtimestamp(mid, self.zone).utcoffset() == before:
                low = mid
            else:
                high = mid
        return datetime.fromtimestamp(high, UTC)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else _ORDINALS.get(n % 10, "th")
    return f"{n}{suffix}"


def _month_end(year: int, month: int) -> date:
    return (date(year + month // 12, month % 12 + 1, 1)) - timedelta(days=1)


class RuleSchedule(_Bounded):
    """A weekly or monthly rule in a time zone; business days judged by ``calendars``."""

    def __init__(self, kind: str, rule: Mapping[str, Any], timezone: str,
                 calendars: Sequence[Calendar], *, start_at: datetime | None = None,
                 end_at: datetime | None = None, jitter_seconds: float = 0.0) -> None:
        super().__init__(start_at, end_at, jitter_seconds)
        self.kind = kind
        self.rule = rule
        self.timezone = timezone
        self.wall = _Wall(load_zone(timezone))
        self.calendars = tuple(calendars)
        self.times = [datetime.strptime(t, "%H:%M").time() for t in rule["at"]]
        self.interval = int(rule.get("interval", 1))
        anchor = rule.get("anchor")
        if anchor is not None:
            self.anchor_week: int | None = _week(date.fromisoformat(anchor))
        elif start_at is not None:
            self.anchor_week = _week(self.wall.local(start_at).date())
        elif self.interval > 1:
            raise ValidationError("schedule.weekly.anchor", "is required when interval is "
                                  "more than 1 (or set schedule.start_at): which weeks count")
        else:
            self.anchor_week = None
        self._business = lru_cache(maxsize=64)(self._business_days)

    def is_business_day(self, d: date) -> bool:
        return d.weekday() < 5 and not any(c.covers_day(d) for c in self.calendars)

    def _business_days(self, year: int, month: int) -> tuple[date, ...]:
        end = _month_end(year, month)
        days = (date(year, month, n) for n in range(1, end.day + 1))
        return tuple(d for d in days if self.is_business_day(d))

    def _month_dates(self, year: int, month: int) -> list[date]:
        end = _month_end(year, month)
        if "days" in self.rule:
            found = set()
            for day in self.rule["days"]:
                n = -1 if day == "last" else int(day)
                n = n if n > 0 else end.day + 1 + n
                if 1 <= n <= end.day:
                    found.add(date(year, month, n))
            return sorted(found)
        if "business_day" in self.rule:
            n = int(self.rule["business_day"])
            business = self._business(year, month)
            index = n - 1 if n > 0 else len(business) + n
            return [business[index]] if 0 <= index < len(business) else []
        count, day = int(self.rule["business_days_before_end"]), end
        while count and day.month == month:
            day -= timedelta(days=1)
            count -= self.is_business_day(day)
        return [day] if day.month == month else []

    def _day_matches(self, d: date) -> bool:
        if DAY_NAMES[d.weekday()] not in self.rule["days"]:
            return False
        return self.anchor_week is None or (_week(d) - self.anchor_week) % self.interval == 0

    def _days_from(self, first: date) -> Any:
        """Matching local dates from ``first`` on, in order, within the horizon."""
        last = first + timedelta(days=HORIZON_DAYS)
        if self.kind == "weekly":
            d = first
            while d <= last:
                if self._day_matches(d):
                    yield d
                d += timedelta(days=1)
            return
        year, month = first.year, first.month
        while date(year, month, 1) <= last:
            for d in self._month_dates(year, month):
                if d >= first:
                    yield d
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)

    def _next(self, after: datetime) -> datetime | None:
        # A day early: a reading the DST rule moves may land on the day after its date.
        try:
            first = self.wall.local(after).date() - timedelta(days=1)
        except OverflowError:
            return None
        for d in self._days_from(first):
            for t in self.times:
                instant = self.wall.instant(datetime.combine(d, t))
                if instant > after:
                    return instant
        return None

    def _what(self) -> str:
        at = join([t.strftime("%H:%M") for t in self.times])
        if self.kind == "weekly":
            days_text = join([DAY_WORDS[DAY_NAMES.index(d)] for d in self.rule["days"]])
            every = "every week" if self.interval == 1 else f"every {self.interval} weeks"
            text = f"{every} on {days_text} at {at}"
            if "anchor" in self.rule and self.interval > 1:
                text += f" (counting from the week of {self.rule['anchor']})"
        elif "days" in self.rule:
            names = [("the last day" if d == "last" else
                      f"the {_ordinal(-int(d))} day from the end" if int(d) < 0 else
                      f"the {_ordinal(int(d))}") for d in self.rule["days"]]
            text = f"on {join(names)} of the month at {at}"
        elif "business_day" in self.rule:
            n = int(self.rule["business_day"])
            which = (f"the {_ordinal(n)} business day" if n > 0 else "the last business day"
                     if n == -1 else f"the {_ordinal(-n)} last business day")
            text = f"on {which} of the month at {at}"
        else:
            n = int(self.rule["business_days_before_end"])
            text = (f"{n} business day{'s' if n > 1 else ''} before the end of the month "
                    f"at {at}")
        if self.kind == "monthly" and "days" not in self.rule:
            listed = ", ".join(f"'{c.name}'" for c in self.calendars)
            text += " (business days: Monday to Friday" + (
                f", except what calendar {listed} covers)" if listed else ")")
        return text if self.wall.zone is None else f"{text} ({self.timezone})"


def _week(d: date) -> int:
    """The number of the Monday-started week of ``d``."""
    return (d.toordinal() - d.weekday()) // 7


# --- calendars over any schedule ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fire:
    """A fire time in a preview; ``excluded_by`` names the calendar that drops it."""

    at: datetime
    excluded_by: str | None = None
    reason: str | None = None


class CalendarSchedule:
    """``base``'s fire times, less those the calendars rule out (judged in ``timezone``)."""

    def __init__(self, base: Schedule, timezone: str, exclude: Sequence[Calendar],
                 only: Sequence[Calendar]) -> None:
        self.base = base
        self.timezone = timezone
        self.wall = _Wall(load_zone(timezone))
        self.exclude = tuple(exclude)
        self.only = tuple(only)

    def why_not(self, t: datetime) -> tuple[str, str] | None:
        """(calendar, reason) when ``t`` is ruled out, else None."""
        local = self.wall.local(t)
        for cal in self.exclude:
            reason = cal.reason_at(local)
            if reason is not None:
                return cal.name, f"excluded by calendar '{cal.name}': {reason}"
        if self.only and not any(cal.reason_at(local) is not None for cal in self.only):
            names = ", ".join(f"'{c.name}'" for c in self.only)
            return self.only[0].name, f"outside calendar {names}"
        return None

    def _skip_to(self, t: datetime) -> datetime | None:
        """The instant to look again from, when ``t`` is ruled out; None when it is not."""
        if self.why_not(t) is None:
            return None
        local = self.wall.local(t)
        for _ in range(len(self.exclude) + 2):  # exclusions may abut: follow them
            moved = False
            for cal in self.exclude:
                if cal.reason_at(local) is not None:
                    free = cal.free_from(local)
                    if free is None:
                        return None
                    local, moved = free, True
            if not moved:
                break
        if self.only and not any(c.reason_at(local) is not None for c in self.only):
            local = min(c.next_start(local) for c in self.only)
        return self.wall.before_a_fold(t, self.wall.instant(local))

    def next_after(self, after: datetime) -> datetime | None:
        if self.only and not any(_covers_something(c) for c in self.only):
            return None
        t = self.base.next_after(after)
        horizon = utc(after) + timedelta(days=HORIZON_DAYS)
        for _ in range(_SKIPS):
            if t is None or self.why_not(t) is None:
                return t
            if t > horizon:
                return None
            target = self._skip_to(t)
            if target is None:
                return None
            t = self.base.first_at_or_after(target) if target > t else self.base.next_after(t)
        return None

    def first_at_or_after(self, t: datetime) -> datetime | None:
        t = utc(t)
        try:
            return self.next_after(t - ONE_US)
        except OverflowError:
            return self.next_after(t)

    def describe(self) -> str:
        text = self.base.describe()
        if self.exclude:
            text += ", except on what calendar " + ", ".join(f"'{c.name}'" for c in self.exclude) \
                + " covers"
        if self.only:
            text += ", only within calendar " + ", ".join(f"'{c.name}'" for c in self.only)
        if self.timezone != "UTC" and f"({self.timezone})" not in text:
            text += f" (dates in {self.timezone})"
        return text

    def fires(self, after: datetime, n: int) -> list[Fire]:
        """The next ``n`` fire times after ``after`` and, among them, the first ``n`` that the
        calendars drop (each with its reason); further dropped ones are skipped over."""
        out: list[Fire] = []
        kept = dropped = 0
        t = self.base.next_after(after)
        horizon = utc(after) + timedelta(days=HORIZON_DAYS)
        for _ in range(_SKIPS):
            if t is None or kept >= n or t > horizon:
                break
            why = self.why_not(t)
            if why is None:
                out.append(Fire(at=t))
                kept += 1
                t = self.base.next_after(t)
                continue
            if dropped < n:  # listed one by one, up to n of them; then skipped over
                out.append(Fire(at=t, excluded_by=why[0], reason=why[1]))
                dropped += 1
                t = self.base.next_after(t)
                continue
            target = self._skip_to(t)
            if target is None:
                break
            t = self.base.first_at_or_after(target) if target > t else self.base.next_after(t)
        return out


def _covers_something(cal: Calendar) -> bool:
    return bool(cal.dates or cal.ranges or cal.yearly or cal.weekly)


def compile_calendared(spec: ScheduleSpec,
                       calendars: Mapping[str, Calendar] | None) -> Schedule:
    """A weekly or monthly rule, or any schedule with calendars. A calendar missing from
    ``calendars`` counts as empty: documents are checked without the store; the client checks
    that the calendars exist, and the planner compiles with them."""
    known = calendars or {}
    exclude = [known.get(name) or Calendar(name=name) for name in spec.exclude]
    only = [known.get(name) or Calendar(name=name) for name in spec.only]
    bare = replace(spec, exclude=(), only=())
    base: Schedule
    if spec.type in RULE_TYPES:
        if spec.rule is None:
            raise ValidationError(f"schedule.{spec.type}", "is required")
        base = RuleSchedule(spec.type, json.loads(spec.rule), spec.timezone, exclude,
                            start_at=None if spec.start_at is None else utc(spec.start_at),
                            end_at=None if spec.end_at is None else utc(spec.end_at),
                            jitter_seconds=spec.jitter_seconds)
    else:
        base = compile_schedule(bare)
    if not exclude and not only:
        return base
    return CalendarSchedule(base, spec.timezone, exclude, only)


def preview_fires(schedule: Schedule, after: datetime, n: int) -> list[Fire]:
    """``preview`` with the fire times calendars drop, each with the calendar and why."""
    if isinstance(schedule, CalendarSchedule):
        return schedule.fires(utc(after), n)
    out: list[Fire] = []
    t: datetime | None = utc(after)
    while len(out) < n and t is not None:
        t = schedule.next_after(t)
        if t is not None:
            out.append(Fire(at=t))
    return out
