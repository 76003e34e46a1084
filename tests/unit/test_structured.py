"""Weekly and monthly rules: anchored weeks, month ends, leap years, business days around
holidays, DST days (the cron engine's fixed-time rule, DESIGN G9), validation, descriptions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tickwork.document import job_document, parse_job_document
from tickwork.errors import ValidationError
from tickwork.models import ScheduleSpec
from tickwork.schedules import Schedule, compile_schedule, preview
from tickwork.schedules.calendars import parse_calendar


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def spec_of(schedule: dict[str, Any]) -> ScheduleSpec:
    return parse_job_document({"name": "j", "kind": "http", "schedule": schedule,
                               "payload": {"url": "https://example.org/"}}).spec.schedule


def compiled(schedule: dict[str, Any], **calendars: dict[str, Any]) -> Schedule:
    return compile_schedule(spec_of(schedule), {
        name: parse_calendar({"name": name, **doc}) for name, doc in calendars.items()})


def local_days(times: list[datetime]) -> list[str]:
    return [t.strftime("%Y-%m-%d %H:%M") for t in times]


def test_every_two_weeks_on_tuesday_anchored_on_a_date() -> None:
    s = compiled({"weekly": {"days": ["tue"], "at": "09:00", "interval": 2,
                             "anchor": "2030-01-15"}})
    assert local_days(preview(s, utc(2030, 1, 1), 3)) == [
        "2030-01-01 09:00", "2030-01-15 09:00", "2030-01-29 09:00"]
    assert s.describe() == ("every 2 weeks on Tuesday at 09:00 "
                            "(counting from the week of 2030-01-15)")


def test_weeks_anchored_on_start_at() -> None:
    s = compiled({"weekly": {"days": ["mon", "thursday"], "at": ["08:00", "17:30"],
                             "interval": 3}, "start_at": "2030-01-09T00:00:00Z"})
    assert local_days(preview(s, utc(2030, 1, 1), 5)) == [
        "2030-01-10 08:00", "2030-01-10 17:30", "2030-01-28 08:00", "2030-01-28 17:30",
        "2030-01-31 08:00"]


def test_the_15th_and_the_last_day_across_february_and_leap_years() -> None:
    s = compiled({"monthly": {"days": [15, "last"], "at": "18:00"}})
    assert local_days(preview(s, utc(2031, 2, 1), 4)) == [
        "2031-02-15 18:00", "2031-02-28 18:00", "2031-03-15 18:00", "2031-03-31 18:00"]
    assert local_days(preview(s, utc(2032, 2, 16), 1)) == ["2032-02-29 18:00"]
    assert s.describe() == "on the 15th and the last day of the month at 18:00"


def test_day_31_only_in_long_months_and_days_from_the_end() -> None:
    s = compiled({"monthly": {"days": [31], "at": "00:00"}})
    assert local_days(preview(s, utc(2030, 4, 1), 2)) == ["2030-05-31 00:00", "2030-07-31 00:00"]
    s = compiled({"monthly": {"days": [-2], "at": "12:00"}})
    assert local_days(preview(s, utc(2032, 2, 1), 2)) == ["2032-02-28 12:00", "2032-03-30 12:00"]


HOLIDAYS = {"dates": ["2030-01-01", "2030-01-02", "2030-05-31"], "weekly": []}


def test_the_third_business_day_around_holidays() -> None:
    plain = compiled({"monthly": {"business_day": 3, "at": "09:00"}})
    assert local_days(preview(plain, utc(2030, 1, 1), 1)) == ["2030-01-03 09:00"]
    hol = compiled({"monthly": {"business_day": 3, "at": "09:00"}, "exclude": ["hol"]},
                   hol=HOLIDAYS)
    # Jan 1 and 2 are holidays, Jan 5 and 6 a weekend: Jan 3, 4, 7.
    assert local_days(preview(hol, utc(2030, 1, 1), 2)) == ["2030-01-07 09:00",
                                                            "2030-02-05 09:00"]
    assert "3rd business day" in hol.describe()


def test_the_last_business_day_and_business_days_before_the_end() -> None:
    last = compiled({"monthly": {"business_day": -1, "at": "17:00"}, "exclude": ["hol"]},
                    hol=HOLIDAYS)
    # May 31 2030 (a Friday) is a holiday: Thursday May 30. Aug 31 2030 is a Saturday.
    assert local_days(preview(last, utc(2030, 5, 1), 1)) == ["2030-05-30 17:00"]
    assert local_days(preview(last, utc(2030, 8, 1), 1)) == ["2030-08-30 17:00"]
    before = compiled({"monthly": {"business_days_before_end": 2, "at": "09:00"},
                       "exclude": ["hol"]}, hol=HOLIDAYS)
    # From Friday May 31: Thursday 30 (1), Wednesday 29 (2).
    assert local_days(preview(before, utc(2030, 5, 1), 1)) == ["2030-05-29 09:00"]
    # From Sunday March 31: Friday 29 (1), Thursday 28 (2).
    assert local_days(preview(before, utc(2030, 3, 1), 1)) == ["2030-03-28 09:00"]
    assert before.describe().startswith("2 business days before the end of the month at 09:00")


def test_a_time_skipped_by_dst_fires_at_the_end_of_the_gap() -> None:
    # Berlin springs forward on 2030-03-31 at 02:00 (to 03:00).
    s = compiled({"monthly": {"days": ["last"], "at": "02:30"}, "timezone": "Europe/Berlin"})
    assert preview(s, utc(2030, 3, 1), 2) == [utc(2030, 3, 31, 1, 0), utc(2030, 4, 30, 0, 30)]


def test_a_repeated_time_fires_once_at_its_first_instance() -> None:
    # Berlin falls back on 2030-10-27 at 03:00 (to 02:00): 02:30 happens twice.
    s = compiled({"weekly": {"days": ["sun"], "at": "02:30"}, "timezone": "Europe/Berlin"})
    assert preview(s, utc(2030, 10, 26), 2) == [utc(2030, 10, 27, 0, 30),
                                                utc(2030, 11, 3, 1, 30)]
    assert s.next_after(utc(2030, 10, 27, 0, 30)) == utc(2030, 11, 3, 1, 30)


def test_the_document_round_trips() -> None:
    for schedule in (
        {"weekly": {"days": ["TUE", "mon"], "at": "09:00", "interval": 2,
                    "anchor": "2030-01-07"}, "timezone": "Europe/Paris"},
        {"monthly": {"days": ["last", 15, 1], "at": ["18:00", "06:00"]}},
        {"monthly": {"business_day": -2, "at": "09:00"}, "exclude": ["hol"]},
        {"cron": "0 9 * * 1-5", "exclude": ["hol"], "only": ["season"],
         "timezone": "Europe/Paris"},
        {"every": 3600, "exclude": ["hol"]},
    ):
        spec = parse_job_document({"name": "j", "kind": "http", "schedule": schedule,
                                   "payload": {"url": "https://example.org/"}}).spec
        assert parse_job_document(job_document(spec)).spec == spec


@pytest.mark.parametrize(("schedule", "field", "message"), [
    ({"weekly": {"days": [], "at": "09:00"}}, "schedule.weekly.days", "non-empty"),
    ({"weekly": {"days": ["tue", "fun"], "at": "09:00"}}, "schedule.weekly.days[1]",
     "unknown day"),
    ({"weekly": {"days": ["tue"]}}, "schedule.weekly.at", "is required"),
    ({"weekly": {"days": ["tue"], "at": "9am"}}, "schedule.weekly.at", "HH:MM"),
    ({"weekly": {"days": ["tue"], "at": ["09:00", "24:00"]}}, "schedule.weekly.at[1]", "HH:MM"),
    ({"weekly": {"days": ["tue"], "at": "09:00", "interval": 0}}, "schedule.weekly.interval",
     "from 1 to 52"),
    ({"weekly": {"days": ["tue"], "at": "09:00", "interval": 2}}, "schedule.weekly.anchor",
     "is required when interval"),
    ({"weekly": {"days": ["tue"], "at": "09:00", "anchor": "2030-13-01"}},
     "schedule.weekly.anchor", "must be a date"),
    ({"weekly": {"days": ["tue"], "at": "09:00", "every": 2}}, "schedule.weekly",
     "unknown field 'every'"),
    ({"monthly": {"at": "09:00"}}, "schedule.monthly", "exactly one of"),
    ({"monthly": {"days": [0], "at": "09:00"}}, "schedule.monthly.days[0]", "not 0"),
    ({"monthly": {"days": [32], "at": "09:00"}}, "schedule.monthly.days[0]", "-31 to 31"),
    ({"monthly": {"business_day": 24, "at": "09:00"}}, "schedule.monthly.business_day",
     "-23 to 23"),
    ({"monthly": {"business_days_before_end": 0, "at": "09:00"}},
     "schedule.monthly.business_days_before_end", "from 1 to 22"),
    ({"monthly": {"days": [1], "at": "09:00"}, "offset": 5}, "schedule.offset",
     "only applies to 'every'"),
    ({"cron": "0 9 * * *", "exclude": "hol"}, "schedule.exclude", "must be an array"),
    ({"cron": "0 9 * * *", "exclude": ["hol", "hol"]}, "schedule.exclude[1]", "twice"),
    ({"cron": "0 9 * * *", "only": ["no space"]}, "schedule.only[0]", "must be 1 to 64"),
    ({"every": 60, "timezone": "Europe/Paris"}, "schedule.timezone", "only applies"),
])
def test_bad_rules_name_the_field(schedule: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        spec_of(schedule)
    assert info.value.field == field
    assert message in info.value.reason
