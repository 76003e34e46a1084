"""Schedules: cron parsing and errors, at / every / cron fire times, DST (G9), jitter, describe."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from tickwork.errors import ValidationError
from tickwork.models import ScheduleSpec
from tickwork.schedules import (
    Schedule,
    compile_schedule,
    jitter_offset,
    parse_duration,
    preview,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def cron(expr: str, tz: str = "UTC", **kw: object) -> Schedule:
    return compile_schedule(ScheduleSpec(type="cron", cron=expr, timezone=tz, **kw))  # type: ignore[arg-type]


def every(seconds: float, **kw: object) -> Schedule:
    return compile_schedule(ScheduleSpec(type="every", every_seconds=seconds, **kw))  # type: ignore[arg-type]


def at(when: datetime, **kw: object) -> Schedule:
    return compile_schedule(ScheduleSpec(type="at", at=when, **kw))  # type: ignore[arg-type]


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0,
        microsecond: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, microsecond, tzinfo=UTC)


def local(fires: list[datetime], zone: ZoneInfo) -> list[str]:
    return [f.astimezone(zone).isoformat() for f in fires]


def rejected(expr: str, tz: str = "UTC") -> str:
    with pytest.raises(ValidationError) as info:
        cron(expr, tz)
    return str(info.value)


# --- parse_duration -----------------------------------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [
    (90, 90.0), (1.5, 1.5), ("90", 90.0), ("2.5", 2.5), ("30s", 30.0), ("15m", 900.0),
    ("1h", 3600.0), ("1d", 86400.0), ("1h30m", 5400.0), ("500ms", 0.5), ("1d2h3m4s", 93784.0),
    (" 1H 30M ", 5400.0), ("1.5h", 5400.0), ("1m500ms", 60.5),
])
def test_parse_duration_accepts(value: object, seconds: float) -> None:
    assert parse_duration(value, "every") == seconds


@pytest.mark.parametrize(("value", "message"), [
    (True, "f: expected a number of seconds or a duration, got True"),
    (None, "f: expected a number of seconds or a duration, got NoneType"),
    ([1], "f: expected a number of seconds or a duration, got list"),
    (0, "f: must be greater than zero, got 0"),
    (-5, "f: must be greater than zero, got -5"),
    ("0s", "f: must be greater than zero, got '0s'"),
    ("-5m", "f: must be greater than zero, got '-5m'"),
    (float("nan"), "f: must be a finite number of seconds, got nan"),
    (float("inf"), "f: must be a finite number of seconds, got inf"),
    ("", "f: '' is not a duration (use seconds or a duration like 90, 30s, 15m, 1h, 1d, "
         "1h30m or 500ms)"),
    ("abc", "f: 'abc' is not a duration"),
    ("5x", "f: '5x' is not a duration"),
    ("1m1h", "f: '1m1h' is not a duration"),
    ("1h1h", "f: '1h1h' is not a duration"),
    ("1e3", "f: '1e3' is not a duration"),
    ("nan", "f: 'nan' is not a duration"),
    (1e12, "f: must be at most 100 years, got 1000000000000.0"),
])
def test_parse_duration_rejects(value: object, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_duration(value, "f")
    assert info.value.field == "f"
    assert str(info.value).startswith(message)


# --- cron parse errors --------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "reason"), [
    ("* * * *", "expected 5, 6 or 7 fields, got 4"),
    ("* * * * * * * *", "expected 5, 6 or 7 fields, got 8"),
    ("", "expected 5, 6 or 7 fields, got 0"),
    ("60 * * * * *", "field 'second' value 60 is out of range 0-59"),
    ("60 * * * *", "field 'minute' value 60 is out of range 0-59"),
    ("0 25 * * *", "field 'hour' value 25 is out of range 0-23"),
    ("0 0 0 * *", "field 'day-of-month' value 0 is out of range 1-31"),
    ("0 0 32 * *", "field 'day-of-month' value 32 is out of range 1-31"),
    ("0 0 * 13 *", "field 'month' value 13 is out of range 1-12"),
    ("0 0 * 0 *", "field 'month' value 0 is out of range 1-12"),
    ("0 0 * * 8", "field 'day-of-week' value 8 is out of range 0-7"),
    ("0 1-30 * * *", "field 'hour' value 30 is out of range 0-23"),
    ("*/0 * * * *", "field 'minute' step '0' must be a whole number from 1 to 60"),
    ("*/61 * * * *", "field 'minute' step '61' must be a whole number from 1 to 60"),
    ("0 */x * * *", "field 'hour' step 'x' must be a whole number from 1 to 24"),
    ("*/ * * * *", "field 'minute' step '' must be a whole number from 1 to 60"),
    ("0 5-2 * * *", "field 'hour' range '5-2' starts after it ends"),
    ("0 0 * * FRI-MON", "field 'day-of-week' range 'FRI-MON' starts after it ends"),
    ("0 0 * FOO *", "field 'month' value 'FOO' is not a number or a name it accepts"),
    ("0 0 * * JAN", "field 'day-of-week' value 'JAN' is not a number or a name it accepts"),
    ("0 0 * * MON#", "field 'day-of-week' value 'MON#': the week after '#' must be a whole "
                     "number from 1 to 5"),
    ("0 0 X * *", "field 'day-of-month' value 'X' is not a number it accepts"),
    ("0 MON * * *", "field 'hour' value 'MON' is not a number it accepts"),
    ("0 -1 * * *", "field 'hour' has an empty value"),
    ("? * * * *", "field 'minute' does not accept '?'"),
    ("0,,5 * * * *", "field 'minute' has an empty list item in '0,,5'"),
    ("@fortnightly", "unknown alias '@fortnightly' (known: @yearly, @annually, @monthly, "
                     "@weekly, @daily, @midnight, @hourly)"),
    ("@reboot", "unknown alias '@reboot'"),
    ("0 0 30 2 *", "never fires: none of its months has a day 30"),
    ("0 0 0 31 4,6,9,11 *", "never fires: none of its months has a day 31"),
    ("0 0 30,31 FEB *", "never fires: none of its months has a day 30 or 31"),
])
def test_cron_rejections_name_field_and_reason(expr: str, reason: str) -> None:
    assert rejected(expr).startswith(f"schedule.cron: {reason}")


@pytest.mark.parametrize("tz", ["Mars/Olympus", "", "../etc/passwd", "Europe"])
def test_unknown_time_zone(tz: str) -> None:
    with pytest.raises(ValidationError) as info:
        cron("0 3 * * *", tz)
    assert info.value.field == "schedule.timezone"
    assert str(info.value) == f"schedule.timezone: unknown time zone {tz!r}"


def test_spec_rejections() -> None:
    cases: list[tuple[ScheduleSpec, str]] = [
        (ScheduleSpec(type="every", every_seconds=60, start_at=T0, end_at=T0 - timedelta(1)),
         "schedule.end_at: must not be before start_at (2030-01-01T00:00:00Z), "
         "got 2029-12-31T00:00:00Z"),
        (ScheduleSpec(type="every"), "schedule.every: is required for an 'every' schedule"),
        (ScheduleSpec(type="every", every_seconds=0), "schedule.every: must be greater than zero"),
        (ScheduleSpec(type="every", every_seconds=1e-9),
         "schedule.every: must be at least 1 microsecond"),
        (ScheduleSpec(type="every", every_seconds=60, offset_seconds=60),
         "schedule.offset: must be less than the interval (1 minute), got 1 minute"),
        (ScheduleSpec(type="every", every_seconds=60, offset_seconds=-1),
         "schedule.offset: must be a finite number of seconds, zero or more, got -1"),
        (ScheduleSpec(type="every", every_seconds=60, jitter_seconds=float("nan")),
         "schedule.jitter_seconds: must be a finite number of seconds, zero or more, got nan"),
        (ScheduleSpec(type="at"), "schedule.at: is required for an 'at' schedule"),
        (ScheduleSpec(type="cron"), "schedule.cron: is required for a 'cron' schedule"),
        (ScheduleSpec(type="hourly"),  # type: ignore[arg-type]
         "schedule: unknown schedule type 'hourly' (expected 'at', 'cron', 'every', 'weekly' "
         "or 'monthly')"),
        (ScheduleSpec(type="weekly"), "schedule.weekly: is required"),
        (ScheduleSpec(type="every", every_seconds=60, timezone="Mars/Olympus"),
         "schedule.timezone: unknown time zone 'Mars/Olympus'"),
    ]
    for spec, message in cases:
        with pytest.raises(ValidationError) as info:
            compile_schedule(spec)
        assert str(info.value).startswith(message), spec
        assert info.value.field == message.split(":")[0]


# --- cron syntax --------------------------------------------------------------------------


@pytest.mark.parametrize(("alias", "expr"), [
    ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"), ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"), ("@DAILY", "0 0 * * *"),
])
def test_aliases(alias: str, expr: str) -> None:
    assert preview(cron(alias), T0, 5) == preview(cron(expr), T0, 5)


def test_five_fields_fire_at_second_zero_and_strictly_after() -> None:
    s = cron("*/15 * * * *")
    assert preview(s, utc(2030, 1, 1, 0, 0, 0), 3) == [
        utc(2030, 1, 1, 0, 15), utc(2030, 1, 1, 0, 30), utc(2030, 1, 1, 0, 45)]
    assert s.next_after(utc(2030, 1, 1, 0, 14, 59, 999999)) == utc(2030, 1, 1, 0, 15)
    assert s.first_at_or_after(utc(2030, 1, 1, 0, 15)) == utc(2030, 1, 1, 0, 15)
    assert s.first_at_or_after(utc(2030, 1, 1, 0, 15, 0, 1)) == utc(2030, 1, 1, 0, 30)


def test_seconds_field_comes_first() -> None:
    assert preview(cron("*/20 * * * * *"), T0, 4) == [
        T0 + timedelta(seconds=s) for s in (20, 40, 60, 80)]
    assert preview(cron("15 30 2 * * *"), T0, 2) == [
        utc(2030, 1, 1, 2, 30, 15), utc(2030, 1, 2, 2, 30, 15)]


def test_lists_ranges_and_steps() -> None:
    minutes = [f.minute for f in preview(cron("10-50/10 0 * * *"), T0, 5)]
    assert minutes == [10, 20, 30, 40, 50]
    assert [f.minute for f in preview(cron("5/15 0 * * *"), T0, 4)] == [5, 20, 35, 50]
    assert [f.hour for f in preview(cron("0 1,3,22-23 * * *"), T0, 4)] == [1, 3, 22, 23]


def test_names_are_case_insensitive_and_seven_is_sunday() -> None:
    sundays = preview(cron("0 0 * * 0"), T0, 4)
    assert preview(cron("0 0 * * 7"), T0, 4) == sundays
    assert preview(cron("0 0 * * sun"), T0, 4) == sundays
    assert all(f.isoweekday() == 7 for f in sundays)
    fires = preview(cron("0 0 1 jan,Jul *"), T0, 3)
    assert [(f.year, f.month) for f in fires] == [(2030, 7), (2031, 1), (2031, 7)]
    assert {f.isoweekday() for f in preview(cron("0 0 * * MON-FRI"), T0, 20)} == {1, 2, 3, 4, 5}
    assert {f.isoweekday() for f in preview(cron("0 0 * * 5-7"), T0, 9)} == {5, 6, 7}


def test_day_of_month_or_day_of_week_when_both_restricted() -> None:
    fires = preview(cron("0 0 13 * 5"), T0, 8)  # the 13th, or any Friday
    assert all(f.day == 13 or f.isoweekday() == 5 for f in fires)
    assert {f.day == 13 for f in fires} == {True, False}
    assert all(f.isoweekday() == 5 for f in preview(cron("0 0 * * 5"), T0, 8))
    assert all(f.day == 13 for f in preview(cron("0 0 13 * *"), T0, 8))
    assert all(f.isoweekday() == 1 for f in preview(cron("0 0 ? * MON"), T0, 8))
    # A field starting with `*` counts as unrestricted (Vixie): odd days that are Mondays.
    assert all(f.day % 2 == 1 and f.isoweekday() == 1
               for f in preview(cron("0 0 */2 * 1"), T0, 8))


def test_rare_dates() -> None:
    # Impossible ones (the 30th of February) are refused: see the rejections above.
    assert cron("0 0 31 4,6,9,11,12 *", "Europe/Berlin").next_after(T0) == utc(2030, 12, 30, 23)
    assert cron("0 0 29 2 *").next_after(T0) == utc(2032, 2, 29)
    # 2100 is not a leap year: the next Feb 29 after 2096 is 8 years away.
    assert cron("0 0 29 2 *").next_after(utc(2096, 3, 1)) == utc(2104, 2, 29)


def test_naive_inputs_are_utc() -> None:
    assert cron("0 * * * *").next_after(datetime(2030, 1, 1, 0, 30)) == utc(2030, 1, 1, 1)


# --- at, every, bounds ---------------------------------------------------------------------


def test_at_fires_once() -> None:
    s = at(T0)
    assert s.next_after(T0 - timedelta(microseconds=1)) == T0
    assert s.next_after(T0) is None
    assert s.first_at_or_after(T0) == T0
    assert preview(s, T0 - timedelta(days=1), 5) == [T0]
    assert at(T0, start_at=T0 + timedelta(seconds=1)).next_after(utc(2000, 1, 1)) is None
    assert at(T0, end_at=T0 - timedelta(seconds=1)).next_after(utc(2000, 1, 1)) is None
    assert at(T0, start_at=T0, end_at=T0).next_after(utc(2000, 1, 1)) == T0


def test_every_is_anchored_at_the_epoch_without_start_at() -> None:
    s = every(900)
    assert preview(s, utc(2030, 1, 1, 0, 7, 3), 3) == [
        utc(2030, 1, 1, 0, 15), utc(2030, 1, 1, 0, 30), utc(2030, 1, 1, 0, 45)]
    assert every(86400).next_after(utc(2030, 1, 1, 12)) == utc(2030, 1, 2)
    assert every(3600, offset_seconds=300).next_after(utc(2030, 1, 1, 0, 7)) == utc(
        2030, 1, 1, 1, 5)


def test_every_is_anchored_at_start_at() -> None:
    start = utc(2030, 1, 1, 12, 7, 30)
    s = every(900, start_at=start)
    assert s.next_after(utc(2029, 1, 1)) == start
    assert s.first_at_or_after(start) == start
    assert preview(s, start, 2) == [start + timedelta(minutes=15), start + timedelta(minutes=30)]
    assert s.next_after(start + timedelta(minutes=16)) == start + timedelta(minutes=30)
    shifted = every(900, start_at=start, offset_seconds=300)
    assert preview(shifted, utc(2029, 1, 1), 2) == [
        start + timedelta(minutes=5), start + timedelta(minutes=20)]


def test_every_sub_second() -> None:
    assert preview(every(parse_duration("500ms", "every")), T0, 3) == [
        T0 + timedelta(milliseconds=ms) for ms in (500, 1000, 1500)]


def test_start_and_end_are_inclusive_bounds() -> None:
    start, end = utc(2030, 1, 1, 1), utc(2030, 1, 1, 3)
    s = cron("0 * * * *", start_at=start, end_at=end)
    assert preview(s, utc(2029, 6, 1), 10) == [start, utc(2030, 1, 1, 2), end]
    assert s.first_at_or_after(end) == end
    assert s.next_after(end) is None
    e = every(3600, end_at=end)
    assert preview(e, utc(2030, 1, 1, 1, 30), 10) == [utc(2030, 1, 1, 2), end]


def test_preview_is_capped() -> None:
    assert len(preview(every(1), T0, 5000)) == 1000
    assert preview(every(1), T0, 0) == []
    assert preview(at(T0), T0, 3) == []


# --- DST (G9) ------------------------------------------------------------------------------


def test_fixed_time_in_a_gap_fires_once_at_the_end_of_the_gap() -> None:
    fires = preview(cron("30 2 * * *", "Europe/Berlin"), utc(2025, 3, 28), 4)
    assert local(fires, BERLIN) == [
        "2025-03-28T02:30:00+01:00", "2025-03-29T02:30:00+01:00",
        "2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"]
    fires = preview(cron("30 2 * * *", "America/New_York"), utc(2025, 3, 8), 3)
    assert local(fires, NEW_YORK) == [
        "2025-03-08T02:30:00-05:00", "2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"]


def test_fixed_time_repeated_fires_once_at_its_first_instance() -> None:
    fires = preview(cron("30 2 * * *", "Europe/Berlin"), utc(2025, 10, 25), 3)
    assert local(fires, BERLIN) == [
        "2025-10-25T02:30:00+02:00", "2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"]
    fires = preview(cron("30 1 * * *", "America/New_York"), utc(2025, 11, 1, 12), 3)
    assert local(fires, NEW_YORK) == [
        "2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00", "2025-11-04T01:30:00-05:00"]
    # From inside the second pass, the day's fire is already past.
    assert cron("30 2 * * *", "Europe/Berlin").next_after(utc(2025, 10, 26, 1, 10)) == utc(
        2025, 10, 27, 1, 30)


def test_several_fixed_times_in_one_gap_fire_once() -> None:
    fires = preview(cron("0,30 2 * * *", "Europe/Berlin"), utc(2025, 3, 29, 12), 3)
    assert local(fires, BERLIN) == [
        "2025-03-30T03:00:00+02:00", "2025-03-31T02:00:00+02:00", "2025-03-31T02:30:00+02:00"]


@pytest.mark.parametrize(("tz", "day"), [("Europe/Berlin", 30), ("America/New_York", 9)])
def test_wildcard_schedules_never_fire_in_a_gap(tz: str, day: int) -> None:
    zone = ZoneInfo(tz)
    start = datetime(2025, 3, day, tzinfo=zone) - timedelta(microseconds=1)
    for expr, per_day in (("*/15 * * * *", 23 * 4), ("0 * * * *", 23)):
        fires = [f for f in preview(cron(expr, tz), start, 200)
                 if f.astimezone(zone).day == day]
        assert len(fires) == per_day
        assert all(f.astimezone(zone).hour != 2 for f in fires)


@pytest.mark.parametrize(("tz", "month", "day", "hour"), [
    ("Europe/Berlin", 10, 26, 2), ("America/New_York", 11, 2, 1)])
def test_wildcard_schedules_fire_twice_in_a_repeated_hour(
        tz: str, month: int, day: int, hour: int) -> None:
    zone = ZoneInfo(tz)
    start = datetime(2025, month, day, tzinfo=zone) - timedelta(microseconds=1)
    for expr, per_day, per_hour in (("*/15 * * * *", 25 * 4, 4), ("0 * * * *", 25, 1)):
        fires = [f for f in preview(cron(expr, tz), start, 200)
                 if f.astimezone(zone).day == day]
        assert len(fires) == per_day
        repeated = [f for f in fires if f.astimezone(zone).hour == hour]
        assert len(repeated) == 2 * per_hour
        assert fires == sorted(set(fires))
        assert {f.astimezone(zone).utcoffset() for f in repeated} == {
            zone.utcoffset(datetime(2025, month, day, hour, fold=0)),
            zone.utcoffset(datetime(2025, month, day, hour, fold=1))}
    before = datetime(2025, month, day, hour - 1, 30, tzinfo=zone)
    hourly = preview(cron("0 * * * *", tz), before, 3)
    assert [t[11:16] for t in local(hourly, zone)] == [
        f"{hour:02d}:00", f"{hour:02d}:00", f"{hour + 1:02d}:00"]
    assert [b - a for a, b in pairwise(hourly)] == [timedelta(hours=1)] * 2


def test_from_inside_the_first_pass_of_a_repeated_hour() -> None:
    after = utc(2025, 10, 26, 0, 50)  # 02:50 CEST; 02:00-02:59 comes again in CET
    assert local(preview(cron("0 * * * *", "Europe/Berlin"), after, 2), BERLIN) == [
        "2025-10-26T02:00:00+01:00", "2025-10-26T03:00:00+01:00"]
    assert local(preview(cron("*/15 * * * *", "Europe/Berlin"), after, 2), BERLIN) == [
        "2025-10-26T02:00:00+01:00", "2025-10-26T02:15:00+01:00"]
    assert local(preview(cron("0 2 * * *", "Europe/Berlin"), after, 1), BERLIN) == [
        "2025-10-27T02:00:00+01:00"]


def test_every_second_jumps_over_a_gap() -> None:
    fires = preview(cron("* * * * * *", "Europe/Berlin"), utc(2025, 3, 30, 0, 59, 58), 3)
    assert local(fires, BERLIN) == [
        "2025-03-30T01:59:59+01:00", "2025-03-30T03:00:00+02:00", "2025-03-30T03:00:01+02:00"]


def test_midnight_transitions() -> None:
    santiago = ZoneInfo("America/Santiago")  # 24:00 -> 23:00 in April, 24:00 -> 01:00 in Sept.
    fires = preview(cron("30 23 * * *", "America/Santiago"), utc(2025, 4, 5, 12), 2)
    assert local(fires, santiago) == ["2025-04-05T23:30:00-03:00", "2025-04-06T23:30:00-04:00"]
    fires = preview(cron("0 * * * *", "America/Santiago"), utc(2025, 4, 6, 1), 3)
    assert local(fires, santiago) == [
        "2025-04-05T23:00:00-03:00", "2025-04-05T23:00:00-04:00", "2025-04-06T00:00:00-04:00"]
    fires = preview(cron("30 0 * * *", "America/Santiago"), utc(2025, 9, 6, 12), 2)
    assert local(fires, santiago) == ["2025-09-07T01:00:00-03:00", "2025-09-08T00:30:00-03:00"]


def test_every_is_exact_elapsed_time_across_dst() -> None:
    for start in (utc(2025, 3, 29, 22), utc(2025, 10, 25, 22)):
        fires = preview(every(3600), start, 8)
        assert [b - a for a, b in zip([start, *fires], fires, strict=False)] == [
            timedelta(hours=1)] * 8
    # In Berlin local time the autumn day shows 02:00 twice.
    autumn = local(preview(every(3600), utc(2025, 10, 25, 22), 4), BERLIN)
    assert [t[11:16] for t in autumn] == ["01:00", "02:00", "02:00", "03:00"]


def test_cron_in_a_zone_without_dst() -> None:
    fires = preview(cron("30 9 * * *", "Asia/Kolkata"), T0, 2)
    assert fires == [utc(2030, 1, 1, 4), utc(2030, 1, 2, 4)]


# --- describe ------------------------------------------------------------------------------


@pytest.mark.parametrize(("schedule", "text"), [
    (lambda: every(900), "every 15 minutes"),
    (lambda: every(1), "every second"),
    (lambda: every(5400), "every 90 minutes"),
    (lambda: every(86400, offset_seconds=3600), "every day (offset 1 hour)"),
    (lambda: cron("0 3 * * *", "Europe/Berlin"), "at 03:00 every day (Europe/Berlin)"),
    (lambda: at(T0), "once at 2030-01-01T00:00:00Z"),
    (lambda: cron("* * * * * *"), "every second"),
    (lambda: cron("* * * * *"), "every minute"),
    (lambda: cron("*/15 * * * *"), "every 15 minutes"),
    (lambda: cron("0 * * * *"), "every hour"),
    (lambda: cron("30 * * * *"), "every hour at minute 30"),
    (lambda: cron("0 */2 * * *"), "every 2 hours"),
    (lambda: cron("*/10 * * * * *"), "every 10 seconds"),
    (lambda: cron("0,30 * * * *"), "at minutes 0 and 30 of every hour"),
    (lambda: cron("*/15 9-17 * * 1-5"),
     "every 15 minutes, hours 9 through 17 on Monday through Friday"),
    (lambda: cron("30 2 * * 1-5"), "at 02:30 on Monday through Friday"),
    (lambda: cron("0 9,12,18 * * *"), "at 09:00, 12:00 and 18:00 every day"),
    (lambda: cron("15 30 2 * * *"), "at 02:30:15 every day"),
    (lambda: cron("0 9 1,15 * *"), "at 09:00 on days 1 and 15 of the month"),
    (lambda: cron("0 0 13 * 5"), "at 00:00 on day 13 of the month or on Friday"),
    (lambda: cron("@yearly"), "at 00:00 on January 1"),
    (lambda: cron("0 0 1 1,7 *"), "at 00:00 on day 1 of the month in January and July"),
    (lambda: cron("0 8 * 6-8 *"), "at 08:00 in June through August"),
    (lambda: every(60, start_at=T0, end_at=T0 + timedelta(days=1), jitter_seconds=30),
     "every minute, from 2030-01-01T00:00:00Z, until 2030-01-02T00:00:00Z, "
     "with up to 30 seconds of jitter"),
])
def test_describe(schedule: object, text: str) -> None:
    assert callable(schedule)
    assert schedule().describe() == text


# --- jitter --------------------------------------------------------------------------------


def test_jitter_is_deterministic_and_bounded() -> None:
    offsets = [jitter_offset(f"job-{i}", T0, 30.0) for i in range(500)]
    assert offsets == [jitter_offset(f"job-{i}", T0, 30.0) for i in range(500)]
    assert all(timedelta(0) <= o < timedelta(seconds=30) for o in offsets)
    assert len(set(offsets)) > 490  # spread, not clumped
    assert max(offsets) > timedelta(seconds=25)
    assert min(offsets) < timedelta(seconds=5)
    # The same instant in another zone is the same occurrence, so the same jitter.
    assert jitter_offset("a", T0.astimezone(BERLIN), 30) == jitter_offset("a", T0, 30)
    assert jitter_offset("a", T0, 30) != jitter_offset("a", T0 + timedelta(minutes=1), 30)


def test_jitter_edges() -> None:
    assert jitter_offset("a", T0, 0) == timedelta(0)
    assert jitter_offset("a", T0, 1e-7) == timedelta(0)
    tiny = [jitter_offset(str(i), T0, 0.000002) for i in range(100)]
    assert set(tiny) == {timedelta(0), timedelta(microseconds=1)}
    with pytest.raises(ValidationError):
        jitter_offset("a", T0, -1)
    with pytest.raises(ValidationError):
        jitter_offset("a", T0, float("nan"))
