"""``tickwork jobs create`` then ``jobs show`` with the cron day forms (`L`, `5#2`, `LW`),
weekly and monthly rules and a calendar exclusion: the schedule in words and the next fire
times, which the test works out on its own from the calendar module and the tz database.

The schedules start on the 1st of January of next year, so what `jobs show` previews does not
depend on the day the test runs (the CLI reads the system clock)."""

from __future__ import annotations

import calendar
import json
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from test_cli import tw  # noqa: F401  (the fixture)

YEAR = datetime.now(UTC).year + 1
START = f"{YEAR}-01-01T00:00:00Z"


def utc_text(day: date, hour: int, minute: int = 0, tz: str = "UTC") -> str:
    local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=ZoneInfo(tz))
    return local.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def last_day(month: int) -> date:
    return date(YEAR, month, calendar.monthrange(YEAR, month)[1])


def last_weekday(month: int) -> date:
    day = last_day(month)
    while day.weekday() >= 5:
        day -= timedelta(days=1)
    return day


def nth(weekday: int, n: int, month: int) -> date:
    """The n-th ``weekday`` (Monday 0) of the month."""
    first = date(YEAR, month, 1)
    return first + timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))


def create_and_show(tw: Any, name: str, schedule: dict[str, Any],  # noqa: F811
                    ) -> tuple[str, list[str], dict[str, Any]]:
    """The description and the next-times lines ``jobs show`` prints, and its JSON."""
    doc = {"name": name, "kind": "http", "payload": {"url": "https://example.org/"},
           "schedule": {**schedule, "start_at": START}}
    code, out, err = tw("jobs", "create", "--json", "-", stdin=json.dumps(doc))
    assert code == 0, err
    code, out, err = tw("jobs", "show", name, "--next", "3")
    assert code == 0, err
    [described] = [line.removeprefix("schedule").strip() for line in out.splitlines()
                   if line.startswith("schedule ")]
    times = [line.strip() for line in out.split("next fire times:\n")[1].splitlines()]
    shown = json.loads(tw("jobs", "show", name, "--next", "3", "--json")[1])
    assert shown["description"] == described
    return described, times, shown


def test_cron_day_forms_in_words_and_their_next_times(tw: Any) -> None:  # noqa: F811
    described, times, shown = create_and_show(
        tw, "month-end", {"cron": "0 9 L * *", "timezone": "Europe/Berlin"})
    assert described == ("at 09:00 on the last day of the month (Europe/Berlin), from "
                         f"{START}")
    assert times == [utc_text(last_day(m), 9, tz="Europe/Berlin") for m in (1, 2, 3)]
    assert shown["next_fire_times"] == times

    described, times, _ = create_and_show(
        tw, "payroll", {"cron": "0 18 LW * *", "timezone": "America/New_York"})
    assert described == ("at 18:00 on the last weekday of the month (America/New_York), "
                         f"from {START}")
    assert times == [utc_text(last_weekday(m), 18, tz="America/New_York") for m in (1, 2, 3)]


def test_a_calendar_drops_a_second_friday_and_jobs_show_says_why(tw: Any) -> None:  # noqa: F811
    off = nth(4, 2, 1)  # January's second Friday
    assert tw("calendars", "create", "fridays-off", "--date", off.isoformat())[0] == 0
    described, times, shown = create_and_show(
        tw, "review", {"cron": "30 8 ? * 5#2", "exclude": ["fridays-off"]})
    assert described == (f"at 08:30 on the second Friday of the month, from {START}, except "
                         "on what calendar 'fridays-off' covers")
    assert times == [
        f"{utc_text(off, 8, 30)}  skipped: excluded by calendar 'fridays-off': {off}",
        *(utc_text(nth(4, 2, m), 8, 30) for m in (2, 3, 4))]
    assert shown["next_fire_times"] == [utc_text(nth(4, 2, m), 8, 30) for m in (2, 3, 4)]
    assert shown["excluded_fire_times"] == [{
        "at": utc_text(off, 8, 30), "excluded_by": "fridays-off",
        "reason": f"excluded by calendar 'fridays-off': {off}"}]


def test_weekly_and_monthly_rules_in_words_and_their_next_times(tw: Any) -> None:  # noqa: F811
    tuesday = nth(1, 1, 1)
    described, times, _ = create_and_show(tw, "sprint", {
        "weekly": {"days": ["tue"], "at": "09:00", "interval": 2,
                   "anchor": tuesday.isoformat()}, "timezone": "Europe/Paris"})
    assert described == (f"every 2 weeks on Tuesday at 09:00 (counting from the week of "
                         f"{tuesday}) (Europe/Paris), from {START}")
    assert times == [utc_text(tuesday + timedelta(weeks=w), 9, tz="Europe/Paris")
                     for w in (0, 2, 4)]

    described, times, _ = create_and_show(
        tw, "twice-monthly", {"monthly": {"days": [15, "last"], "at": "18:00"}})
    assert described == f"on the 15th and the last day of the month at 18:00, from {START}"
    assert times == [utc_text(date(YEAR, 1, 15), 18), utc_text(last_day(1), 18),
                     utc_text(date(YEAR, 2, 15), 18)]
