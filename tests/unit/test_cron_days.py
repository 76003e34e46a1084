"""Cron's Quartz day forms (L, L-n, LW, nW, d#n, dL), the year field and nicknames: fire
times, the DST rule (G9) for them, refusals and descriptions."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from test_schedules import BERLIN, NEW_YORK, T0, cron, local, rejected, utc

from tickwork.schedules import preview


def days(expr: str, after: datetime, n: int, tz: str = "UTC") -> list[str]:
    """The local dates of the next ``n`` fires, as "2026-01-30"."""
    zone = ZoneInfo(tz)
    return [f.astimezone(zone).date().isoformat() for f in preview(cron(expr, tz), after, n)]


def test_last_day_of_the_month_knows_leap_years_and_month_lengths() -> None:
    assert days("0 0 L * *", utc(2027, 12, 31, 12), 6) == [
        "2028-01-31", "2028-02-29", "2028-03-31", "2028-04-30", "2028-05-31", "2028-06-30"]
    assert days("0 0 L 2 *", utc(2026, 1, 1), 4) == [
        "2026-02-28", "2027-02-28", "2028-02-29", "2029-02-28"]
    # 2100 is no leap year.
    assert days("0 0 l 2 *", utc(2099, 3, 1), 2) == ["2100-02-28", "2101-02-28"]
    assert preview(cron("30 6 L * *"), utc(2026, 4, 30, 6, 30), 1) == [utc(2026, 5, 31, 6, 30)]


def test_days_before_the_last() -> None:
    assert days("0 0 L-3 * *", T0, 3) == ["2030-01-28", "2030-02-25", "2030-03-28"]
    assert days("0 0 L-1 2 *", utc(2027, 3, 1), 2) == ["2028-02-28", "2029-02-27"]
    # L-30 exists only in months of 31 days: their 1st.
    assert days("0 0 L-30 * *", utc(2029, 12, 31), 3) == ["2030-01-01", "2030-03-01", "2030-05-01"]


def test_last_weekday_of_the_month() -> None:
    # 2026: Jan 31 is a Saturday, Feb 28 a Saturday, May 31 a Sunday, Mar 31 a Tuesday.
    assert days("0 0 LW * *", utc(2026, 1, 1), 5) == [
        "2026-01-30", "2026-02-27", "2026-03-31", "2026-04-30", "2026-05-29"]


def test_nearest_weekday_never_leaves_the_month() -> None:
    # Saturday the 1st (November 2025, August 2026): Monday the 3rd, not Friday the 31st before.
    assert days("0 0 1W 11 *", utc(2025, 1, 1), 1) == ["2025-11-03"]
    assert days("0 0 1W 8 *", utc(2026, 1, 1), 1) == ["2026-08-03"]
    # Sunday the 31st (May 2026): Friday the 29th, not Monday the 1st after.
    assert days("0 0 31W 5 *", utc(2026, 1, 1), 1) == ["2026-05-29"]
    # Sunday the 30th, the last day of November 2025: Friday the 28th.
    assert days("0 0 30W 11 *", utc(2025, 1, 1), 1) == ["2025-11-28"]
    # May 2026: the 15th a Friday, the 16th a Saturday, the 17th a Sunday.
    assert days("0 0 15W 5 *", utc(2026, 1, 1), 1) == ["2026-05-15"]
    assert days("0 0 16W 5 *", utc(2026, 1, 1), 1) == ["2026-05-15"]
    assert days("0 0 17w 5 *", utc(2026, 1, 1), 1) == ["2026-05-18"]
    # Like a plain 31, 31W passes over months without a 31st.
    assert days("0 0 31W * *", utc(2026, 1, 1), 4) == [
        "2026-01-30", "2026-03-31", "2026-05-29", "2026-07-31"]


def test_nth_weekday_of_the_month() -> None:
    assert days("0 0 ? * FRI#2", utc(2026, 1, 1), 3) == ["2026-01-09", "2026-02-13", "2026-03-13"]
    assert days("0 0 * * 5#2", utc(2026, 1, 1), 3) == days("0 0 * * fri#2", utc(2026, 1, 1), 3)
    assert days("0 0 ? 11 THU#4", utc(2026, 1, 1), 3) == ["2026-11-26", "2027-11-25", "2028-11-23"]
    assert days("0 0 * * 7#1", utc(2026, 1, 1), 2) == ["2026-01-04", "2026-02-01"]  # Sunday
    assert days("0 0 * * 0#1", utc(2026, 1, 1), 2) == ["2026-01-04", "2026-02-01"]


def test_fifth_weekday_skips_months_without_one() -> None:
    # 2026 has five Fridays in January, May, July and October only.
    assert days("0 0 * * 5#5", utc(2026, 1, 1), 5) == [
        "2026-01-30", "2026-05-29", "2026-07-31", "2026-10-30", "2027-01-29"]
    # A fifth Friday in February: a leap year whose February starts on a Friday.
    assert days("0 0 ? 2 FRI#5", utc(2026, 1, 1), 3) == ["2036-02-29", "2064-02-29", "2092-02-29"]


def test_last_given_weekday_of_the_month() -> None:
    assert days("0 0 * * MONL", utc(2026, 1, 1), 3) == ["2026-01-26", "2026-02-23", "2026-03-30"]
    assert days("0 0 * * 5L", utc(2026, 1, 1), 3) == ["2026-01-30", "2026-02-27", "2026-03-27"]
    assert days("0 0 * * 7L", utc(2026, 1, 1), 2) == days("0 0 * * SUNl", utc(2026, 1, 1), 2)


def test_forms_mix_with_plain_values_in_lists() -> None:
    assert days("0 0 1,15,L * *", utc(2026, 1, 10), 5) == [
        "2026-01-15", "2026-01-31", "2026-02-01", "2026-02-15", "2026-02-28"]
    assert days("0 0 * * MON#1,FRI#3", utc(2026, 1, 1), 4) == [
        "2026-01-05", "2026-01-16", "2026-02-02", "2026-02-20"]
    assert days("0 0 * * 1,5L", utc(2026, 1, 24), 4) == [
        "2026-01-26", "2026-01-30", "2026-02-02", "2026-02-09"]


def test_day_of_month_or_day_of_week_with_the_new_forms() -> None:
    # Both restricted: either matches (Vixie OR), as for plain values.
    assert days("0 0 L * 5#2", utc(2026, 1, 1), 4) == [
        "2026-01-09", "2026-01-31", "2026-02-13", "2026-02-28"]
    assert days("0 0 1 * FRIL", utc(2026, 1, 1), 3) == ["2026-01-30", "2026-02-01", "2026-02-27"]
    # One of them starting with `*` or `?`: both must match.
    assert days("0 0 ? * 5#2", utc(2026, 1, 1), 1) == ["2026-01-09"]
    assert days("0 0 */2 * 5#2", utc(2026, 3, 1), 3) == ["2026-03-13", "2026-09-11", "2026-10-09"]


def test_seven_fields_end_with_a_year() -> None:
    assert preview(cron("0 0 0 1 1 ? 2027"), T0.replace(year=2026), 5) == [utc(2027, 1, 1)]
    assert preview(cron("15 30 9 * * * 2031"), T0, 2) == [
        utc(2031, 1, 1, 9, 30, 15), utc(2031, 1, 2, 9, 30, 15)]
    assert [f.year for f in preview(cron("0 0 0 1 1 * 2030-2032,2040"), utc(2029, 6, 1), 9)] == [
        2030, 2031, 2032, 2040]
    assert [f.year for f in preview(cron("0 0 0 1 1 * 2030/5"), utc(2029, 6, 1), 3)] == [
        2030, 2035, 2040]
    assert [f.year for f in preview(cron("0 0 0 1 1 * */100"), T0, 3)] == [2070, 2170]
    assert preview(cron("0 0 0 L 2 ? 2028"), T0.replace(year=2026), 3) == [utc(2028, 2, 29)]
    assert cron("0 0 0 * * * 1999").next_after(utc(1970, 1, 1)) == utc(1999, 1, 1)
    assert cron("0 0 0 * * * 1999").next_after(T0) is None
    assert cron("0 0 0 1 1 * 2199").next_after(T0) == utc(2199, 1, 1)  # 169 years on
    assert cron("0 0 0 * * * 2199").next_after(utc(2199, 12, 31)) is None


def test_nicknames_fire_at_second_zero() -> None:
    for nickname in ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
                     "@hourly"):
        fires = preview(cron(nickname, "Europe/Berlin"), utc(2026, 5, 17, 12, 34, 56), 3)
        assert len(fires) == 3
        assert all(f.second == 0 and f.minute == 0 for f in fires), nickname
    assert local(preview(cron("@monthly", "Europe/Berlin"), T0, 1), BERLIN) == [
        "2030-02-01T00:00:00+01:00"]


def test_forms_follow_the_dst_rule_as_plain_values_do() -> None:
    """G9 is about the time fields; a form only chooses the day. 2024-03-31 (Berlin) and
    2025-03-09 (New York) are spring-forward days, 2025-10-26 and 2025-11-02 fall-back days."""
    spring = [("Europe/Berlin", utc(2024, 3, 1), "30 2 L 3 *", "30 2 31 3 *"),
              ("Europe/Berlin", utc(2025, 3, 1), "30 2 ? 3 SUNL", "30 2 30 3 *"),
              ("America/New_York", utc(2025, 3, 1), "30 2 ? * SUN#2", "30 2 9 3 *"),
              ("America/New_York", utc(2025, 3, 1), "0 30 2 ? 3 0#2 2025", "30 2 9 3 *")]
    for tz, after, form, plain in spring:
        fire = cron(form, tz).next_after(after)
        assert fire == cron(plain, tz).next_after(after), form
        assert fire is not None
        assert fire.astimezone(ZoneInfo(tz)).strftime("%H:%M") == "03:00", form  # after the gap
    # Wildcard times on those days: never in the gap, exactly as with the plain day.
    for tz, day, form, plain, per_day in (
            ("Europe/Berlin", datetime(2024, 3, 31), "*/15 * L 3 *", "*/15 * 31 3 *", 23 * 4),
            ("America/New_York", datetime(2025, 3, 9), "0 * ? 3 SUN#2", "0 * 9 3 *", 23)):
        zone = ZoneInfo(tz)
        after = day.replace(tzinfo=zone) - timedelta(microseconds=1)
        ours, theirs = preview(cron(form, tz), after, 100), preview(cron(plain, tz), after, 100)
        that_day = [f for f in ours if f.astimezone(zone).date() == day.date()]
        assert that_day == [f for f in theirs if f.astimezone(zone).date() == day.date()]
        assert len(that_day) == per_day
        assert all(f.astimezone(zone).hour != 2 for f in that_day)
    # Fall back: a fixed time fires once, at its first instance; a wildcard in each pass.
    assert local(preview(cron("30 2 ? 10 SUNL", "Europe/Berlin"), utc(2025, 10, 1), 1),
                 BERLIN) == ["2025-10-26T02:30:00+02:00"]
    assert local(preview(cron("30 1 ? 11 SUN#1", "America/New_York"), utc(2025, 10, 1), 1),
                 NEW_YORK) == ["2025-11-02T01:30:00-04:00"]
    assert local(preview(cron("0,30 2 ? 10 0L", "Europe/Berlin"), utc(2025, 10, 25, 12), 3), BERLIN
                 ) == ["2025-10-26T02:00:00+02:00", "2025-10-26T02:30:00+02:00",
                       "2026-10-25T02:00:00+02:00"]  # a fall-back day too
    assert local(preview(cron("*/30 2 ? 10 0L", "Europe/Berlin"), utc(2025, 10, 25, 12), 4), BERLIN
                 ) == ["2025-10-26T02:00:00+02:00", "2025-10-26T02:30:00+02:00",
                       "2025-10-26T02:00:00+01:00", "2025-10-26T02:30:00+01:00"]


@pytest.mark.parametrize(("expr", "reason"), [
    ("0 0 0 ? 2 5#5 2027", "never fires: no day in February of 2027 is the fifth Friday of the "
                           "month (field 'day-of-week' '5#5'), so a job on such a schedule "
                           "would never run"),
    ("0 0 0 ? 2 FRI#5 2037-2063", "never fires: no day in February of 2037 through 2063 is the "
                                  "fifth Friday"),
    ("0 0 31W 4,6 *", "never fires: no day in April or June is the weekday nearest the 31st of "
                      "the month (field 'day-of-month' '31W')"),
    ("0 0 L-30 2 *", "never fires: no day in February is the 30th day before the last day of "
                     "the month (field 'day-of-month' 'L-30')"),
    ("0 0 0 29 2 ? 2101-2103", "never fires: no day in February of 2101 through 2103 is day 29 "
                               "of the month (field 'day-of-month' '29')"),
    ("0 0 0 31 2 5#5 2027", "never fires: no day in February of 2027 is day 31 of the month or "
                            "the fifth Friday of the month (field 'day-of-month' '31' or field "
                            "'day-of-week' '5#5')"),
    ("0 0 31 4 *", "never fires: none of its months has a day 31"),
    ("0 0 * * L", "field 'day-of-week' value 'L' needs a weekday before it ('5L' or 'FRIL': "
                  "the last Friday of the month); the last day of the month is 'L' in "
                  "day-of-month"),
    ("0 0 * * 5#6", "field 'day-of-week' value '5#6': the week after '#' must be a whole number "
                    "from 1 to 5"),
    ("0 0 * * 5#0", "field 'day-of-week' value '5#0': the week after '#'"),
    ("0 0 * * 8#1", "field 'day-of-week' value 8 is out of range 0-7"),
    ("0 0 * * FOOL", "field 'day-of-week' value 'FOO' is not a number or a name it accepts"),
    ("0 0 L-0 * *", "field 'day-of-month' value 'L-0': the days before the last ('L-n') must "
                    "be a whole number from 1 to 30"),
    ("0 0 L-31 * *", "field 'day-of-month' value 'L-31': the days before the last"),
    ("0 0 0W * *", "field 'day-of-month' value 0 is out of range 1-31"),
    ("0 0 32W * *", "field 'day-of-month' value 32 is out of range 1-31"),
    ("0 0 LW/2 * *", "field 'day-of-month' value 'LW/2' is not a form it accepts (a number, "
                     "range or step, or one of 'L', 'L-n', 'LW', 'nW'; these take no range or "
                     "step)"),
    ("0 0 1-L * *", "field 'day-of-month' value '1-L' is not a form it accepts"),
    ("0 0 W15 * *", "field 'day-of-month' value 'W15' is not a form it accepts"),
    ("0 0 * 5#2 *", "field 'month' value '5#2' is not a number or a name it accepts"),
    ("0 0 0 * * * 1969", "field 'year' value 1969 is out of range 1970-2199"),
    ("0 0 0 * * * 2200", "field 'year' value 2200 is out of range 1970-2199"),
    ("0 0 0 * * * ?", "field 'year' does not accept '?'"),
    ("0 0 0 * * * 2030-2020", "field 'year' range '2030-2020' starts after it ends"),
    ("0 0 0 * * * */0", "field 'year' step '0' must be a whole number from 1 to 230"),
])
def test_refusals_of_the_new_forms_name_the_field_and_why(expr: str, reason: str) -> None:
    assert rejected(expr).startswith(f"schedule.cron: {reason}")


@pytest.mark.parametrize(("expr", "text"), [
    ("0 0 L * *", "at 00:00 on the last day of the month"),
    ("0 0 LW * *", "at 00:00 on the last weekday of the month"),
    ("0 9 15W * *", "at 09:00 on the weekday nearest the 15th of the month"),
    ("0 9 1W,22W * *", "at 09:00 on the weekday nearest the 1st and the weekday nearest the "
                       "22nd of the month"),
    ("0 0 L-1 * *", "at 00:00 on the day before the last day of the month"),
    ("0 0 L-3 * *", "at 00:00 on the 3rd day before the last day of the month"),
    ("0 0 1,15,L * *", "at 00:00 on days 1 and 15 and the last day of the month"),
    ("0 8 ? * FRI#2", "at 08:00 on the second Friday of the month"),
    ("0 8 ? * 1#1,3#3", "at 08:00 on the first Monday and the third Wednesday of the month"),
    ("0 8 ? * MONL", "at 08:00 on the last Monday of the month"),
    ("0 0 L * 5", "at 00:00 on the last day of the month or on Friday"),
    ("0 0 L 2 *", "at 00:00 on the last day of February"),
    ("0 12 ? 11 THU#4", "at 12:00 on the fourth Thursday of November"),
    ("0 0 L 1,7 *", "at 00:00 on the last day of the month in January and July"),
    ("*/15 9-17 ? * 5L", "every 15 minutes, hours 9 through 17 on the last Friday of the month"),
    ("0 0 9 * * * 2027", "at 09:00 every day in 2027"),
    ("0 0 9 1 1 ? 2027", "at 09:00 on January 1 in 2027"),
    ("0 0 9 L * ? 2027-2030", "at 09:00 on the last day of the month in the years 2027 through "
                              "2030"),
    ("0 0 9 * 6-8 ? 2027,2029", "at 09:00 in June through August in the years 2027 and 2029"),
    ("0 0 0 1 1 ? 2026/4", "at 00:00 on January 1 every 4 years from 2026 through 2198"),
    ("@weekly", "at 00:00 on Sunday"),
    ("@monthly", "at 00:00 on day 1 of the month"),
])
def test_describe_the_new_forms(expr: str, text: str) -> None:
    assert cron(expr).describe() == text
