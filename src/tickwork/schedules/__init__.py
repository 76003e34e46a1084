"""When jobs fire: one-off (``at``), ``cron`` and ``every`` schedules, durations, jitter.

Pure code: no I/O, no clock reads. Every function takes the instants it needs, and every
instant in and out is an aware ``datetime`` in UTC (naive values are taken as UTC).
The cron engine itself lives in :mod:`tickwork.schedules.cron`; DESIGN G9 describes the DST rule.
"""

from __future__ import annotations

import hashlib
import math
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tickwork.errors import ValidationError
from tickwork.models import ScheduleSpec, rfc3339, utc
from tickwork.schedules.cron import CronExpr

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tickwork.schedules.calendars import Calendar
    from tickwork.schedules.structured import Fire

__all__ = [
    "AtSchedule",
    "CronSchedule",
    "EverySchedule",
    "Schedule",
    "auto_offset",
    "compile_schedule",
    "for_job",
    "jitter_offset",
    "load_zone",
    "parse_duration",
    "preview",
    "preview_fires",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_US = timedelta(microseconds=1)
ONE_SECOND = timedelta(seconds=1)
PREVIEW_LIMIT = 1000
MAX_DURATION = 100 * 366 * 86_400.0  # 100 years: beyond this, datetime arithmetic overflows soon
UTC_NAMES = frozenset({"UTC", "Etc/UTC", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"})

_NUMBER = r"\d+(?:\.\d+)?"
_DURATION = re.compile(
    rf"(?:(?P<d>{_NUMBER})d)?\s*(?:(?P<h>{_NUMBER})h)?\s*(?:(?P<m>{_NUMBER})m(?!s))?\s*"
    rf"(?:(?P<s>{_NUMBER})s)?\s*(?:(?P<ms>{_NUMBER})ms)?",
    re.ASCII,
)
_UNIT_SECONDS = {"d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_DURATION_HINT = "use seconds or a duration like 90, 30s, 15m, 1h, 1d, 1h30m or 500ms"


def parse_duration(value: object, field: str) -> float:
    """Seconds from a positive number or a string such as ``"90"``, ``"15m"``, ``"1h30m"``."""
    if isinstance(value, bool):
        raise ValidationError(field, f"expected a number of seconds or a duration, got {value}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        if text.startswith("-"):
            raise ValidationError(field, f"must be greater than zero, got '{value}'")
        if re.fullmatch(_NUMBER, text, re.ASCII):
            seconds = float(text)
        else:
            match = _DURATION.fullmatch(text)
            if not text or match is None:
                raise ValidationError(field, f"'{value}' is not a duration ({_DURATION_HINT})")
            seconds = sum(float(amount) * _UNIT_SECONDS[unit]
                          for unit, amount in match.groupdict().items() if amount is not None)
    else:
        raise ValidationError(
            field, f"expected a number of seconds or a duration, got {type(value).__name__}")
    if not math.isfinite(seconds):
        raise ValidationError(field, f"must be a finite number of seconds, got {value}")
    if seconds <= 0:
        raise ValidationError(field, f"must be greater than zero, got {value!r}")
    if seconds > MAX_DURATION:
        raise ValidationError(field, f"must be at most 100 years, got {value!r}")
    return seconds


def load_zone(name: object, field: str = "schedule.timezone") -> ZoneInfo | None:
    """The IANA zone called ``name``; None for UTC (which needs no DST handling)."""
    if not isinstance(name, str) or not name:
        raise ValidationError(field, f"unknown time zone {name!r}")
    if name in UTC_NAMES:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValidationError(field, f"unknown time zone '{name}'") from None


class Schedule(Protocol):
    """Fire times of one job. Aware UTC datetimes in and out."""

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire time strictly after ``after``; None when there is none."""
        ...

    def first_at_or_after(self, t: datetime) -> datetime | None:
        """The first fire time at or after ``t``; None when there is none."""
        ...

    def describe(self) -> str:
        """A short description in plain English."""
        ...


class _Bounded:
    """What the three schedule types share: start_at/end_at (inclusive) and jitter."""

    def __init__(self, start_at: datetime | None, end_at: datetime | None,
                 jitter_seconds: float) -> None:
        self.start_at = start_at
        self.end_at = end_at
        self.jitter_seconds = jitter_seconds

    def _next(self, after: datetime) -> datetime | None:
        raise NotImplementedError

    def _what(self) -> str:
        raise NotImplementedError

    def next_after(self, after: datetime) -> datetime | None:
        after = utc(after)
        if self.start_at is not None and after < self.start_at:
            after = self.start_at - ONE_US
        found = self._next(after)
        if found is None or (self.end_at is not None and found > self.end_at):
            return None
        return found

    def first_at_or_after(self, t: datetime) -> datetime | None:
        t = utc(t)
        try:
            return self.next_after(t - ONE_US)
        except OverflowError:  # t is the first representable instant
            return self.next_after(t)

    def describe(self) -> str:
        text = self._what()
        if self.start_at is not None:
            text += f", from {rfc3339(self.start_at)}"
        if self.end_at is not None:
            text += f", until {rfc3339(self.end_at)}"
        if self.jitter_seconds:
            text += f", with up to {_amount(self.jitter_seconds)} of jitter"
        return text


class AtSchedule(_Bounded):
    """Fires once, at ``at``."""

    def __init__(self, at: datetime, start_at: datetime | None = None,
                 end_at: datetime | None = None, jitter_seconds: float = 0.0) -> None:
        super().__init__(start_at, end_at, jitter_seconds)
        self.at = utc(at)

    def _next(self, after: datetime) -> datetime | None:
        return self.at if self.at > after else None

    def _what(self) -> str:
        return f"once at {rfc3339(self.at)}"


class CronSchedule(_Bounded):
    """Fires when the local time in ``timezone`` matches a cron expression (DESIGN G9)."""

    def __init__(self, expression: str, timezone: str = "UTC", start_at: datetime | None = None,
                 end_at: datetime | None = None, jitter_seconds: float = 0.0) -> None:
        super().__init__(start_at, end_at, jitter_seconds)
        self.timezone = timezone
        self.expr = CronExpr(expression, load_zone(timezone))

    def _next(self, after: datetime) -> datetime | None:
        found = self.expr.next_after((after - EPOCH) // ONE_SECOND)
        return None if found is None else EPOCH + timedelta(seconds=found)

    def _what(self) -> str:
        text = self.expr.describe()
        return text if self.expr.tz is None else f"{text} ({self.timezone})"


class EverySchedule(_Bounded):
    """Fires at ``anchor + offset + k * interval``; anchor is start_at, else the Unix epoch.

    Exact elapsed time: DST and time zones do not affect it.

    ``offset_auto``: the offset is each job's own (``auto_offset``); ``for_job`` gives the
    schedule of one job. Until then it fires as if the offset were 0.
    """

    def __init__(self, every_seconds: float, offset_seconds: float = 0.0,
                 start_at: datetime | None = None, end_at: datetime | None = None,
                 jitter_seconds: float = 0.0, *, offset_auto: bool = False) -> None:
        super().__init__(start_at, end_at, jitter_seconds)
        self.every_seconds = every_seconds
        self.offset_seconds = offset_seconds
        self.offset_auto = offset_auto
        self._interval_us = round(every_seconds * 1_000_000)
        anchor = EPOCH if start_at is None else start_at
        self._base_us = (anchor - EPOCH) // ONE_US + round(offset_seconds * 1_000_000)

    def _next(self, after: datetime) -> datetime | None:
        after_us = (after - EPOCH) // ONE_US
        k = (after_us - self._base_us) // self._interval_us + 1
        try:
            return EPOCH + timedelta(microseconds=self._base_us + k * self._interval_us)
        except OverflowError:
            return None

    def for_job(self, job_id: str) -> EverySchedule:
        """This schedule as job ``job_id`` runs it: an automatic offset made that job's own."""
        if not self.offset_auto:
            return self
        return EverySchedule(self.every_seconds, auto_offset(job_id, self.every_seconds),
                             self.start_at, self.end_at, self.jitter_seconds, offset_auto=True)

    def _what(self) -> str:
        text = f"every {_amount(self.every_seconds, one='')}"
        if self.offset_auto:
            text += f" (offset {_amount(self.offset_seconds)}, auto)" if self.offset_seconds \
                else " (offset auto)"
        elif self.offset_seconds:
            text += f" (offset {_amount(self.offset_seconds)})"
        return text


def auto_offset(job_id: str, every_seconds: float) -> float:
    """Seconds in ``[0, every_seconds)`` from a hash of ``job_id``: the same for the same job
    on every instance and after every restart, and spread evenly over the interval across jobs.

    Whole milliseconds for intervals of a second or more, microseconds below."""
    span_us = round(every_seconds * 1_000_000)
    step_us = 1000 if span_us >= 1_000_000 else 1
    steps = span_us // step_us
    digest = hashlib.blake2b(f"offset:{job_id}".encode(), digest_size=8).digest()
    return ((int.from_bytes(digest, "big") * steps) >> 64) * step_us / 1_000_000


def for_job(schedule: Schedule, job_id: str) -> Schedule:
    """``schedule`` as job ``job_id`` runs it: the same object unless its offset is automatic."""
    if isinstance(schedule, EverySchedule):
        return schedule.for_job(job_id)
    return schedule


def compile_schedule(spec: ScheduleSpec,
                     calendars: Mapping[str, Calendar] | None = None) -> Schedule:
    """A validated, ready-to-query schedule, or ValidationError naming the field and why.

    ``calendars``: the calendars the schedule names, by name (``schedules.structured``)."""
    load_zone(spec.timezone)  # checked for every type, so a typo never passes silently
    start_at = None if spec.start_at is None else utc(spec.start_at)
    end_at = None if spec.end_at is None else utc(spec.end_at)
    if start_at is not None and end_at is not None and end_at < start_at:
        raise ValidationError("schedule.end_at", f"must not be before start_at "
                              f"({rfc3339(start_at)}), got {rfc3339(end_at)}")
    jitter = _non_negative(spec.jitter_seconds, "schedule.jitter_seconds")
    if spec.offset_auto and (spec.type != "every" or spec.exclude or spec.only):
        raise ValidationError("schedule.offset", "'auto' applies to 'every' schedules without "
                              "'exclude' or 'only'")
    if spec.type in ("weekly", "monthly") or spec.exclude or spec.only:  # and calendars
        from tickwork.schedules.structured import compile_calendared  # noqa: PLC0415  (it imports this module)

        return compile_calendared(spec, calendars)
    if spec.type == "at":
        if spec.at is None:
            raise ValidationError("schedule.at", "is required for an 'at' schedule")
        return AtSchedule(spec.at, start_at, end_at, jitter)
    if spec.type == "cron":
        if not isinstance(spec.cron, str):
            raise ValidationError("schedule.cron", "is required for a 'cron' schedule")
        return CronSchedule(spec.cron, spec.timezone, start_at, end_at, jitter)
    if spec.type == "every":
        if spec.every_seconds is None:
            raise ValidationError("schedule.every", "is required for an 'every' schedule")
        every = parse_duration(spec.every_seconds, "schedule.every")
        if round(every * 1_000_000) < 1:
            raise ValidationError("schedule.every", f"must be at least 1 microsecond, got {every}")
        offset = _non_negative(spec.offset_seconds, "schedule.offset")
        if offset >= every:
            raise ValidationError("schedule.offset", f"must be less than the interval "
                                  f"({_amount(every)}), got {_amount(offset)}")
        if spec.offset_auto and offset:
            raise ValidationError("schedule.offset", f"is 'auto' or a number of seconds, not "
                                  f"both (got {_amount(offset)} with auto)")
        return EverySchedule(every, offset, start_at, end_at, jitter, offset_auto=spec.offset_auto)
    raise ValidationError("schedule", f"unknown schedule type {spec.type!r} "
                          "(expected 'at', 'cron', 'every', 'weekly' or 'monthly')")


def preview(schedule: Schedule, after: datetime, n: int) -> list[datetime]:
    """The next ``n`` fire times strictly after ``after`` (``n`` is capped at 1000)."""
    times: list[datetime] = []
    current: datetime | None = after
    while current is not None and len(times) < min(n, PREVIEW_LIMIT):
        current = schedule.next_after(current)
        if current is not None:
            times.append(current)
    return times


def preview_fires(schedule: Schedule, after: datetime, n: int) -> list[Fire]:
    """``preview``, with the fire times the schedule's calendars drop and why (each a Fire)."""
    from tickwork.schedules.structured import preview_fires as fires  # noqa: PLC0415  (it imports this module)

    return fires(schedule, after, min(n, PREVIEW_LIMIT))


def jitter_offset(job_id: str, scheduled_at: datetime, jitter_seconds: float) -> timedelta:
    """A delay in ``[0, jitter_seconds)``, the same for the same (job, scheduled_at).

    Microsecond resolution, from a BLAKE2b hash: every planner instance agrees without talking.
    """
    if not (math.isfinite(jitter_seconds) and jitter_seconds >= 0):
        raise ValidationError("jitter_seconds", f"must be zero or more, got {jitter_seconds}")
    span_us = round(jitter_seconds * 1_000_000)
    if span_us <= 0:
        return timedelta(0)
    digest = hashlib.blake2b(f"{job_id}:{rfc3339(scheduled_at)}".encode(), digest_size=8).digest()
    return timedelta(microseconds=(int.from_bytes(digest, "big") * span_us) >> 64)


def _non_negative(value: float, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, f"expected a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValidationError(field, f"must be a finite number of seconds, zero or more, "
                              f"got {value}")
    return float(value)


_UNITS = ((86_400, "day"), (3_600, "hour"), (60, "minute"), (1, "second"))


def _amount(seconds: float, one: str = "1 ") -> str:
    """``900`` -> "15 minutes", ``3600`` -> "1 hour" (or "hour" with ``one=""``)."""
    for size, unit in _UNITS:
        if seconds >= size and (seconds / size).is_integer():
            count = int(seconds // size)
            return f"{one}{unit}" if count == 1 else f"{count} {unit}s"
    return f"{seconds:g} seconds"
