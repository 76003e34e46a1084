"""Property tests for cron's Quartz day forms (`L`, `L-n`, `LW`, `nW`, `d#n`, `dL`) and the year
field: agreement with croniter where their semantics agree, with a reference written from
Quartz's definitions where they do not, and DST behaviour (G9) on sampled zones and change days
(test_cron_forms_every_zone.py checks each form in every zone that changes)."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

from cron_reference import Matcher, brute_force, is_fixed, transition_between, transitions
from croniter import (  # type: ignore[import-untyped]  # no stubs published
    CroniterBadDateError,
    croniter,
)
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from test_schedules_properties import field

from tickwork.errors import ValidationError
from tickwork.models import ScheduleSpec
from tickwork.schedules import Schedule, compile_schedule, preview

instants = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1),
                        timezones=st.just(UTC))


def compile_cron(expr: str, tz: str, **kw: datetime | None) -> Schedule:
    return compile_schedule(ScheduleSpec(type="cron", cron=expr, timezone=tz, **kw))  # type: ignore[arg-type]



# --- Quartz day forms and the year field ------------------------------------------------------
#
# The reference for which days a form selects is written here from Quartz's definitions, read
# off the calendar module (not tickwork's month masks): croniter agrees with it on `L`, `nW`
# for days every month has, `d#n`, `dL` (croniter writes `Ld`) and the year field, when the
# other day field is unrestricted. Where croniter differs (no `LW` or `L-n`; `31W` in a 30-day
# month clamps to the 30th; `#` with a restricted day-of-month is AND, or an error, not OR),
# fire times are compared with an enumeration over that reference instead.


def _has_a_transition(name: str) -> bool:
    zone = ZoneInfo(name)
    return any(datetime(y, 1, 1, tzinfo=zone).utcoffset() != datetime(y, 7, 1, tzinfo=zone)
               .utcoffset() for y in range(2020, 2031))


# Every zone of the tz database that changes its offset (DST) in 2020-2030.
ALL_DST_ZONES = tuple(sorted(z for z in available_timezones() if _has_a_transition(z)))
WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


def _weekday(text: str) -> int:
    return WEEKDAYS.index(text.upper()) if text.upper() in WEEKDAYS else int(text) % 7


def dom_item_matches(item: str, d: date) -> bool:
    last = calendar.monthrange(d.year, d.month)[1]
    text = item.upper()
    if text == "L":
        return d.day == last
    if text.startswith("L-"):
        return d.day == last - int(text[2:])
    if text == "LW":
        return d.day == max(day for day in range(1, last + 1)
                            if date(d.year, d.month, day).weekday() < 5)
    if text.endswith("W"):  # the Monday-Friday of the same month nearest to day n
        n = int(text[:-1])
        weekdays = [day for day in range(1, last + 1) if date(d.year, d.month, day).weekday() < 5]
        return n <= last and d.day == min(weekdays, key=lambda day: abs(day - n))
    return d.day == int(text)


def dow_item_matches(item: str, d: date) -> bool:
    weekday = d.isoweekday() % 7
    if "#" in item:
        day, week = item.split("#")
        return weekday == _weekday(day) and (d.day - 1) // 7 + 1 == int(week)
    if item.upper().endswith("L"):
        return (weekday == _weekday(item[:-1])
                and d.day + 7 > calendar.monthrange(d.year, d.month)[1])
    return weekday == _weekday(item)


@dataclass(frozen=True)
class Days:
    """Two day fields as lists of items; an empty list is unrestricted (written `*` or `?`)."""

    dom: tuple[str, ...]
    dow: tuple[str, ...]
    star: str = "*"

    def fields(self, *, croniter_syntax: bool = False) -> tuple[str, str]:
        dow = self.dow
        if croniter_syntax:  # croniter writes the last Friday `L5`
            dow = tuple(f"L{i[:-1]}" if i.upper().endswith("L") else i for i in dow)
        return ",".join(self.dom) or self.star, ",".join(dow) or self.star

    def __call__(self, d: date) -> bool:
        return _days_match(self, d)


@lru_cache(maxsize=1 << 16)  # the every-zone tests ask about the same few days many times
def _days_match(days: Days, d: date) -> bool:
    dom = any(dom_item_matches(i, d) for i in days.dom)
    dow = any(dow_item_matches(i, d) for i in days.dow)
    if days.dom and days.dow:
        return dom or dow  # both restricted: either (Vixie cron)
    return (dom or not days.dom) and (dow or not days.dow)


class FormMatcher(Matcher):
    """``Matcher`` with the reference days and years in place of cronsim's day fields."""

    def __init__(self, time_and_month: str, days: Days, years: frozenset[int] | None) -> None:
        super().__init__(time_and_month)
        self.days, self.years = days, years

    def __call__(self, wall: datetime) -> bool:
        sim = self.sim
        return (wall.second in sim.seconds and wall.minute in sim.minutes
                and wall.hour in sim.hours and wall.month in sim.months
                and (self.years is None or wall.year in self.years) and self.days(wall.date()))


weekday_text = st.integers(0, 7).map(str) | st.sampled_from(WEEKDAYS).map(
    lambda name: name.title())


@st.composite
def dom_items(draw: st.DrawFn, *, common: bool) -> tuple[str, ...]:
    if common:  # croniter's forms; nW only for days every month has
        form = st.one_of(st.just("L"), st.integers(1, 28).map(lambda n: f"{n}W"))
        items = [draw(form), *draw(st.lists(st.integers(1, 28).map(str), max_size=2))]
        return tuple(dict.fromkeys(items)) if "W" not in items[0] else (items[0],)
    form = st.one_of(st.sampled_from(["L", "LW", "l", "lw"]),
                     st.integers(1, 30).map(lambda n: f"L-{n}"),
                     st.integers(1, 31).map(lambda n: f"{n}W"), st.integers(1, 31).map(str))
    return tuple(dict.fromkeys(draw(st.lists(form, min_size=1, max_size=3))))


@st.composite
def dow_items(draw: st.DrawFn, *, common: bool) -> tuple[str, ...]:
    nth = st.builds(lambda d, n: f"{d}#{n}", weekday_text, st.integers(1, 5))
    if common:
        last = st.integers(0, 6).map(lambda d: f"{d}L")
        return (draw(last),) if draw(st.booleans()) else tuple(dict.fromkeys(
            draw(st.lists(nth, min_size=1, max_size=2))))
    last = weekday_text.map(lambda d: f"{d}L")
    form = st.one_of(nth, last, weekday_text)
    return tuple(dict.fromkeys(draw(st.lists(form, min_size=1, max_size=3))))


@st.composite
def form_days(draw: st.DrawFn, *, common: bool) -> Days:
    star = draw(st.sampled_from(["*", "?"]))
    side = draw(st.sampled_from(["dom", "dow"] if common else ["dom", "dow", "both"]))
    dom = draw(dom_items(common=common)) if side in ("dom", "both") else ()
    dow = draw(dow_items(common=common)) if side in ("dow", "both") else ()
    return Days(dom, dow, star)


@dataclass(frozen=True)
class FormExpr:
    text: str
    time_and_month: str  # the expression with `*` day fields and no year, for cronsim
    days: Days
    years: frozenset[int] | None
    croniter_text: str


@st.composite
def form_expressions(draw: st.DrawFn, *, common: bool, year: bool | None = None,
                     days: Days | None = None,
                     hours: st.SearchStrategy[str] | None = None) -> FormExpr:
    with_year = draw(st.booleans()) if year is None else year
    with_seconds = with_year or draw(st.booleans())
    times = [draw(field(0, 59))] if with_seconds else ["0"]
    times.append(draw(st.one_of(field(0, 59), st.sampled_from(["0", "30", "0,30", "*/20"]))))
    if hours is None:
        hours = st.one_of(field(0, 23), st.sampled_from(
            ["0", "1", "2", "3", "23", "1,2", "2-3", "0,23", "*"]))
    times.append(draw(hours))
    month = draw(st.one_of(st.just("*"), st.just("*"), field(1, 12)))
    days = days or draw(form_days(common=common))
    years: frozenset[int] | None = None
    year_text = ""
    if with_year:
        low = draw(st.integers(2000, 2045))
        step = draw(st.sampled_from([1, 1, 2, 3]))
        high = draw(st.integers(low if step == 1 else low + step, low + 15))
        year_text = f"{low}-{high}/{step}" if step > 1 else f"{low}-{high}"
        years = frozenset(range(low, high + 1, step))
    dom, dow = days.fields()
    parts = [*times, dom, month, dow] + ([year_text] if with_year else [])
    text = " ".join(parts if with_seconds else parts[1:])
    try:
        compile_cron(text, "UTC")
    except ValidationError:  # never fires, e.g. a fifth Friday in February of 2027
        assume(False)
    c_dom, c_dow = days.fields(croniter_syntax=True)
    c_parts = [*times, c_dom, month, c_dow] + ([year_text] if with_year else [])
    return FormExpr(text, " ".join([*times, "*", month, "*"]), days, years,
                    " ".join(c_parts if with_seconds else c_parts[1:]))


def local_midnight(day: date, zone: ZoneInfo) -> datetime:
    """The start of ``day`` in ``zone`` as a UTC instant (brute_force counts in UTC)."""
    return datetime.combine(day, datetime.min.time()).replace(tzinfo=zone).astimezone(UTC)


def fires_between(schedule: Schedule, after: datetime, end: datetime) -> list[datetime]:
    got: list[datetime] = []
    current = schedule.next_after(after)
    while current is not None and current < end and len(got) < 10_000:
        assert current > after, "not strictly after"
        got.append(current)
        after, current = current, schedule.next_after(current)
    return got


def croniter_start(expr: FormExpr, after: datetime) -> datetime:
    """A start inside the year field's span: from a year outside it, croniter's `L` and `#`
    ignore the year field (`0 0 0 L * * 2039` from 2000 gives 2000-01-31)."""
    if expr.years is None:
        return after
    assume(after.year <= max(expr.years))
    return max(after, datetime(min(expr.years), 1, 2, tzinfo=UTC))


FORMS = settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.filter_too_much])


@FORMS
@given(expr=form_expressions(common=True), after=instants)
def test_forms_match_croniter_in_utc(expr: FormExpr, after: datetime) -> None:
    after = croniter_start(expr, after)
    ours = preview(compile_cron(expr.text, "UTC"), after, 5)
    reference = croniter(expr.croniter_text, after, second_at_beginning=True)
    expected = []
    for _ in range(5):
        try:
            fire = reference.get_next(datetime)
        except CroniterBadDateError:  # past its last year
            break
        if expr.years is not None and fire.year not in expr.years:
            break
        expected.append(fire)
    assert ours == expected, expr.croniter_text


@FORMS
@given(expr=form_expressions(common=True), tz=st.sampled_from(ALL_DST_ZONES), after=instants)
def test_forms_match_croniter_in_every_dst_zone_away_from_transitions(
        expr: FormExpr, tz: str, after: datetime) -> None:
    after = croniter_start(expr, after)
    reference = croniter(expr.croniter_text, after.astimezone(ZoneInfo(tz)),
                         second_at_beginning=True)
    schedule, current, compared = compile_cron(expr.text, tz), after, 0
    for _ in range(4):
        try:
            expected = reference.get_next(datetime).astimezone(UTC)
        except CroniterBadDateError:
            assert schedule.next_after(current) is None
            break
        if expr.years is not None and expected.year not in expr.years:
            break
        if transition_between(tz, current - timedelta(hours=3), expected + timedelta(hours=3)):
            break  # croniter's own DST handling differs; the tests below cover this
        current = schedule.next_after(current)  # type: ignore[assignment]
        assert current == expected, (expr.text, tz)
        compared += 1
    event(f"compared {compared} fire times")


@FORMS
@given(expr=form_expressions(common=False), after=instants)
def test_forms_match_the_reference_in_utc(expr: FormExpr, after: datetime) -> None:
    """All forms, OR of the day fields, years: the next fires against the reference, day by
    day (the time fields are the plain ones the other properties already cover)."""
    fires = preview(compile_cron(expr.text, "UTC"), after, 4)
    days, years = expr.days, expr.years
    match = FormMatcher(expr.time_and_month, days, years)
    assert all(match(f.replace(tzinfo=None)) for f in fires)
    # No matching day was passed over: no day between two fires matches, nor, when fewer
    # fires came than asked for, any day of the next year.
    months = match.sim.months
    day, checks = after.date() + timedelta(days=1), [f.date() for f in fires]
    if len(fires) < 4:
        checks.append(day + timedelta(days=366) if not fires else fires[-1].date() + timedelta(
            days=366))
    for stop in checks:
        while day < stop:
            assert not (days(day) and (years is None or day.year in years)
                        and day.month in months), day
            day += timedelta(days=1)
        day = stop + timedelta(days=1)


@lru_cache(maxsize=8192)
def changes_in(tz: str, year: int) -> tuple[datetime, ...]:
    """``transitions``, found a day at a time (no zone changes twice in a day): fast enough to
    run over every zone."""
    zone = ZoneInfo(tz)
    found = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    while t.year == year:
        later = t + timedelta(days=1)
        if later.astimezone(zone).utcoffset() != t.astimezone(zone).utcoffset():
            low, high = int(t.timestamp()), int(later.timestamp())
            before = t.astimezone(zone).utcoffset()
            while high - low > 1:
                mid = (low + high) // 2
                if datetime.fromtimestamp(mid, zone).utcoffset() == before:
                    low = mid
                else:
                    high = mid
            found.append(datetime.fromtimestamp(high, UTC))
        t = later
    return tuple(found)


def _day_forms_for(d: date) -> list[str]:
    """Every form that selects day ``d``: the reference picks them out of all forms."""
    names = [str(w) for w in range(8)] + list(WEEKDAYS)
    dom = ["L", "LW"] + [f"L-{n}" for n in range(1, 31)] + [f"{n}W" for n in range(1, 32)]
    dow = [f"{w}#{n}" for w in names for n in range(1, 6)] + [f"{w}L" for w in names]
    return ([f"{i} * ?" for i in dom if dom_item_matches(i, d)]
            + [f"? * {i}" for i in dow if dow_item_matches(i, d)])


@settings(max_examples=120, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(tz=st.sampled_from(ALL_DST_ZONES), year=st.integers(2020, 2030), which=st.integers(0, 1),
       data=st.data())
def test_a_form_on_a_dst_day_follows_g9(tz: str, year: int, which: int,
                                        data: st.DataObject) -> None:
    """A form chosen to select the day of a DST change, with times around the change, fires
    as G9 says: compared with an enumeration of that day's instants over the reference."""
    changes = changes_in(tz, year)
    assume(changes)
    change, zone = changes[which % len(changes)], ZoneInfo(tz)
    day = change.astimezone(zone).date()
    form = data.draw(st.sampled_from(_day_forms_for(day)))
    hour = change.astimezone(zone).hour
    near = st.sampled_from([str(hour), str((hour - 1) % 24), f"{(hour - 1) % 24}-{hour}",
                            f"{(hour - 1) % 24},{hour}", "*"])
    dom, _, dow = form.split()
    days = Days(() if dom == "?" else (dom,), () if dow == "?" else (dow,), "?")
    expr = data.draw(form_expressions(common=False, days=days, hours=near, year=False))
    assume(is_fixed(expr.text) or len(Matcher(expr.time_and_month).sim.seconds) <= 2)
    start = local_midnight(day, zone) - timedelta(hours=2)
    end = start + timedelta(hours=30)
    expected = brute_force(expr.text, tz, start, end,
                           FormMatcher(expr.time_and_month, days, None))
    assert fires_between(compile_cron(expr.text, tz), start, end) == expected, expr.text
    event(f"{'fixed' if is_fixed(expr.text) else 'wildcard'}, fires that day: {bool(expected)}")


def test_transitions_helpers_find_the_known_ones() -> None:
    for tz in ("Europe/Berlin", "America/Santiago", "Australia/Lord_Howe", "Asia/Kolkata"):
        assert changes_in(tz, 2025) == transitions(tz, 2025)
    assert len(ALL_DST_ZONES) > 150
    assert transitions("Europe/Berlin", 2025) == (
        datetime(2025, 3, 30, 1, tzinfo=UTC), datetime(2025, 10, 26, 1, tzinfo=UTC))
    assert transitions("Asia/Kolkata", 2025) == ()
    lord_howe = ZoneInfo("Australia/Lord_Howe")
    assert [t.astimezone(lord_howe).isoformat() for t in transitions("Australia/Lord_Howe", 2025)
            ] == ["2025-04-06T01:30:00+10:30", "2025-10-05T02:30:00+11:00"]
