"""Calendars: what a calendar covers (dates, ranges, yearly dates, weekly windows), .ics
import, and schedules that exclude calendars or are restricted to them, judged in their zone."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from tickwork.errors import ValidationError
from tickwork.models import ScheduleSpec
from tickwork.schedules import compile_schedule, preview, preview_fires
from tickwork.schedules.calendars import Calendar, calendar_document, parse_calendar
from tickwork.schedules.ics import parse_ics


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def cal(**doc: object) -> Calendar:
    return parse_calendar({"name": "c", **doc})


HOLIDAYS = cal(dates=["2030-12-25", {"from": "2030-08-01", "to": "2030-08-03"}],
               yearly=["01-01", {"on": "05-01", "from": "2031-01-01"}])


@pytest.mark.parametrize(("day", "reason"), [
    (date(2030, 12, 25), "2030-12-25"),
    (date(2030, 12, 26), None),
    (date(2030, 7, 31), None),
    (date(2030, 8, 1), "2030-08-01 to 2030-08-03"),
    (date(2030, 8, 3), "2030-08-01 to 2030-08-03"),
    (date(2030, 8, 4), None),
    (date(2031, 1, 1), "every year on 01-01"),
    (date(2030, 5, 1), None),  # before the yearly date's 'from'
    (date(2031, 5, 1), "every year on 05-01"),
])
def test_dates_ranges_and_yearly_dates(day: date, reason: str | None) -> None:
    assert HOLIDAYS.day_reason(day) == reason
    assert HOLIDAYS.covers_day(day) is (reason is not None)


def test_weekly_windows() -> None:
    weekend = cal(weekly=["Sat-Sun"])
    assert weekend.reason_at(datetime(2030, 1, 5, 0, 0)) == "weekly Sat-Sun"  # a Saturday
    assert weekend.reason_at(datetime(2030, 1, 6, 23, 59)) == "weekly Sat-Sun"
    assert weekend.reason_at(datetime(2030, 1, 7, 0, 0)) is None  # Monday
    assert weekend.reason_at(datetime(2030, 1, 4, 23, 59)) is None  # Friday
    night = cal(weekly=["Fri 18:00 - Mon 06:00"])
    assert night.reason_at(datetime(2030, 1, 4, 17, 59)) is None
    assert night.reason_at(datetime(2030, 1, 4, 18, 0)) is not None
    assert night.reason_at(datetime(2030, 1, 7, 5, 59)) is not None
    assert night.reason_at(datetime(2030, 1, 7, 6, 0)) is None
    assert night.covers_day(date(2030, 1, 5))
    assert night.covers_day(date(2030, 1, 6))
    assert not night.covers_day(date(2030, 1, 4))
    assert not night.covers_day(date(2030, 1, 7))
    assert night.free_from(datetime(2030, 1, 4, 20, 0)) == datetime(2030, 1, 7, 6, 0)


def test_a_feb_29_yearly_date_only_in_leap_years() -> None:
    leap = cal(yearly=["02-29"])
    assert leap.covers_day(date(2032, 2, 29))
    assert not leap.covers_day(date(2031, 2, 28))
    assert not leap.covers_day(date(2031, 3, 1))


@pytest.mark.parametrize(("doc", "field", "message"), [
    ({"name": "bad name"}, "name", "must be 1 to 64"),
    ({"name": "c", "dates": ["2030-02-30"]}, "dates[0]", "must be a date"),
    ({"name": "c", "dates": [{"from": "2030-01-02", "to": "2030-01-01"}]}, "dates[0].to",
     "must not be before"),
    ({"name": "c", "dates": [{"from": "2030-01-02"}]}, "dates[0]", "exactly 'from' and 'to'"),
    ({"name": "c", "yearly": ["13-01"]}, "yearly[0]", "not a day of the year"),
    ({"name": "c", "yearly": [{"on": "1-1"}]}, "yearly[0].on", "month and day"),
    ({"name": "c", "weekly": ["Caturday"]}, "weekly[0]", "unknown day"),
    ({"name": "c", "weekly": ["Fri 18:00 - Mon"]}, "weekly[0]", "must end at one"),
    ({"name": "c", "weekly": ["Mon 25:00 - Tue 01:00"]}, "weekly[0]", "not a time"),
    ({"name": "c", "colour": 1}, "", "unknown field 'colour'"),
    ({"name": "c", "dates": "2030-01-01"}, "dates", "must be an array"),
])
def test_bad_documents_name_the_field(doc: dict[str, object], field: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_calendar(doc)
    assert info.value.field == field
    assert message in info.value.reason


def test_the_document_round_trips() -> None:
    again = parse_calendar(calendar_document(HOLIDAYS))
    assert again == HOLIDAYS


ICS = """BEGIN:VCALENDAR\r
VERSION:2.0\r
BEGIN:VEVENT\r
SUMMARY:Christmas\r
DTSTART;VALUE=DATE:20301225\r
DTEND;VALUE=DATE:20301227\r
END:VEVENT\r
BEGIN:VEVENT\r
SUMMARY:New Year\r
DTSTART;VALUE=DATE:20300101\r
RRULE:FREQ=YEARLY\r
END:VEVENT\r
BEGIN:VEVENT\r
SUMMARY:Labour\r
  Day\r
DTSTART;VALUE=DATE:20300501\r
RRULE:FREQ=YEARLY;COUNT=2\r
END:VEVENT\r
BEGIN:VEVENT\r
SUMMARY:Thanksgiving\r
DTSTART;VALUE=DATE:20301128\r
RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH\r
END:VEVENT\r
BEGIN:VEVENT\r
SUMMARY:Meeting\r
DTSTART:20300301T090000Z\r
END:VEVENT\r
END:VCALENDAR\r
"""


def test_ics_import() -> None:
    found = parse_ics(ICS)
    assert found.events == 5
    assert found.dates == [{"from": "2030-12-25", "to": "2030-12-26"}, "2030-03-01"]
    assert found.yearly == [{"on": "01-01", "from": "2030-01-01"},
                            {"on": "05-01", "from": "2030-05-01", "until": "2031-12-31"}]
    assert len(found.warnings) == 1
    assert "Thanksgiving" in found.warnings[0]
    holidays = cal(dates=found.dates, yearly=found.yearly)
    assert holidays.covers_day(date(2035, 1, 1))  # the yearly rule
    assert not holidays.covers_day(date(2029, 1, 1))  # before its first year
    assert holidays.covers_day(date(2031, 5, 1))
    assert not holidays.covers_day(date(2032, 5, 1))
    assert holidays.covers_day(date(2030, 12, 26))
    assert not holidays.covers_day(
        date(2030, 12, 27))


def test_ics_errors_name_the_line() -> None:
    with pytest.raises(ValidationError, match="not an iCalendar file"):
        parse_ics("hello")
    with pytest.raises(ValidationError, match="line 3 DTSTART"):
        parse_ics("BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:2030-01-01\nEND:VEVENT\nEND:VCALENDAR")


# --- schedules with calendars -----------------------------------------------------------------


def daily(cron: str = "0 9 * * *", zone: str = "UTC", **more: object) -> ScheduleSpec:
    return ScheduleSpec(type="cron", cron=cron, timezone=zone, **more)  # type: ignore[arg-type]


def test_an_excluded_date_has_no_fire_time() -> None:
    schedule = compile_schedule(daily(exclude=("c",)), {"c": HOLIDAYS})
    times = preview(schedule, utc(2030, 12, 24), 3)
    assert times == [utc(2030, 12, 24, 9), utc(2030, 12, 26, 9), utc(2030, 12, 27, 9)]
    fires = preview_fires(schedule, utc(2030, 12, 24), 3)
    assert [(f.at, f.excluded_by) for f in fires] == [
        (utc(2030, 12, 24, 9), None), (utc(2030, 12, 25, 9), "c"),
        (utc(2030, 12, 26, 9), None), (utc(2030, 12, 27, 9), None)]
    assert fires[1].reason == "excluded by calendar 'c': 2030-12-25"


def test_dates_are_judged_in_the_schedules_zone() -> None:
    # 23:30 in New York on Dec 24 is 04:30 UTC on Dec 25: not excluded there.
    ny = compile_schedule(daily("30 23 * * *", "America/New_York", exclude=("c",)),
                          {"c": HOLIDAYS})
    assert preview(ny, utc(2030, 12, 24, 5), 2) == [utc(2030, 12, 25, 4, 30),
                                                 utc(2030, 12, 27, 4, 30)]
    # 00:30 in Tokyo on Dec 25 is Dec 24 15:30 UTC: excluded.
    tokyo = compile_schedule(daily("30 0 * * *", "Asia/Tokyo", exclude=("c",)), {"c": HOLIDAYS})
    assert preview(tokyo, utc(2030, 12, 23, 16), 2) == [utc(2030, 12, 25, 15, 30),
                                                        utc(2030, 12, 26, 15, 30)]


def test_a_minutely_schedule_skips_a_whole_range_at_once() -> None:
    schedule = compile_schedule(daily("* * * * *", exclude=("c",)), {"c": HOLIDAYS})
    assert schedule.next_after(utc(2030, 7, 31, 23, 58)) == utc(2030, 7, 31, 23, 59)
    assert schedule.next_after(utc(2030, 7, 31, 23, 59)) == utc(2030, 8, 4)


def test_a_weekly_window_in_a_zone_with_dst() -> None:
    night = cal(weekly=["Fri 18:00 - Mon 06:00"])
    hourly = compile_schedule(daily("0 * * * *", "Europe/Berlin", exclude=("c",)), {"c": night})
    # Friday 2030-03-29 17:00 Berlin is 16:00 UTC; DST starts on Sunday 2030-03-31.
    assert hourly.next_after(utc(2030, 3, 29, 15, 30)) == utc(2030, 3, 29, 16)
    assert hourly.next_after(utc(2030, 3, 29, 16)) == utc(2030, 4, 1, 4)  # Mon 06:00 CEST


def test_days_and_windows_are_wall_clock_across_dst_changes() -> None:
    """Europe/Berlin 2030: 02:00-02:59 skipped on 31 March, repeated on 27 October. A date
    covers its 23 or 25 hours; a window's edges are local readings, judged at the time a run
    fires (a run moved out of the gap is judged at 03:00); a repeated reading is covered both
    times or neither (docs/schedules.md, calendars across a DST change)."""
    days = {"c": cal(dates=["2030-10-27"])}
    hourly = compile_schedule(daily("0 * * * *", "Europe/Berlin", exclude=("c",)), days)
    assert preview(hourly, utc(2030, 10, 26, 20, 30), 2) == [
        utc(2030, 10, 26, 21), utc(2030, 10, 27, 23)]  # Sat 23:00 CEST, then Mon 00:00 CET
    ends_in_gap = {"c": cal(weekly=["Sat 22:00 - Sun 02:30"])}
    nightly = compile_schedule(daily("30 2 * * *", "Europe/Berlin", exclude=("c",)), ends_in_gap)
    assert nightly.next_after(utc(2030, 3, 30, 12)) == utc(2030, 3, 31, 1)  # 03:00: kept
    starts_in_gap = {"c": cal(weekly=["Sun 02:30 - Sun 04:00"])}
    nightly = compile_schedule(daily("30 2 * * *", "Europe/Berlin", exclude=("c",)),
                               starts_in_gap)
    assert nightly.next_after(utc(2030, 3, 30, 12)) == utc(2030, 4, 1, 0, 30)  # 03:00: dropped
    assert nightly.next_after(utc(2030, 10, 26, 12)) == utc(2030, 10, 28, 1, 30)
    quarter = compile_schedule(daily("*/15 * * * *", "Europe/Berlin", exclude=("c",)),
                               starts_in_gap)
    assert preview(quarter, utc(2030, 10, 26, 23, 50), 5) == [
        utc(2030, 10, 27, 0), utc(2030, 10, 27, 0, 15),   # 02:00, 02:15 CEST
        utc(2030, 10, 27, 1), utc(2030, 10, 27, 1, 15),   # 02:00, 02:15 CET: free again
        utc(2030, 10, 27, 3)]                             # 04:00 CET, the window's end
    assert preview(quarter, utc(2030, 3, 30, 23, 50), 5) == [
        utc(2030, 3, 31, 0), utc(2030, 3, 31, 0, 15), utc(2030, 3, 31, 0, 30),
        utc(2030, 3, 31, 0, 45), utc(2030, 3, 31, 2)]   # 01:00-01:45 CET, then 04:00 CEST
    # The planner's skips and the preview's one-by-one listing agree across the fold.
    fires = preview_fires(quarter, utc(2030, 10, 26, 23, 50), 5)
    assert [f.at for f in fires if f.excluded_by is None] == preview(
        quarter, utc(2030, 10, 26, 23, 50), 5)
    early = {"c": cal(weekly=["Sun 02:00 - Sun 02:30"])}
    within = compile_schedule(daily("*/15 * * * *", "Europe/Berlin", only=("c",)), early)
    assert preview(within, utc(2030, 10, 26, 23, 50), 4) == [
        utc(2030, 10, 27, 0), utc(2030, 10, 27, 0, 15),   # 02:00, 02:15 CEST
        utc(2030, 10, 27, 1), utc(2030, 10, 27, 1, 15)]   # and again in CET


def test_only_restricts_to_a_calendar() -> None:
    weekend = cal(weekly=["Sat-Sun"])
    schedule = compile_schedule(daily(only=("c",)), {"c": weekend})
    assert preview(schedule, utc(2030, 1, 1), 3) == [utc(2030, 1, 5, 9), utc(2030, 1, 6, 9),
                                                     utc(2030, 1, 12, 9)]
    assert "only within calendar 'c'" in schedule.describe()


def test_a_calendar_that_covers_everything_means_no_fire_time() -> None:
    always = cal(weekly=["Mon-Sun"])
    schedule = compile_schedule(daily(exclude=("c",)), {"c": always})
    assert schedule.next_after(utc(2030, 1, 1)) is None


def test_an_every_schedule_with_a_calendar() -> None:
    spec = ScheduleSpec(type="every", every_seconds=3600, exclude=("c",))
    schedule = compile_schedule(spec, {"c": HOLIDAYS})
    assert schedule.next_after(utc(2030, 12, 24, 23)) == utc(2030, 12, 26)
