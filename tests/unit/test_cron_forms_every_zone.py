"""Every zone of the tz database with a DST rule, every Quartz day form (`L`, `L-n`, `LW`,
`nW`, `d#n`, `dL`), the year field and the nicknames, on days the zone changes its offset:
fire times as G9 says, against an enumeration over the reference (cron_reference.brute_force
and the day reference of test_cron_forms_properties), plus the nicknames against croniter.

Deterministic and cheap: a zone's changes are found month by month, each form is checked on the
first change day of each direction (gap, repeat) that the form can select, and the enumeration
steps a quarter hour (every offset these zones use in 2000-2040 is a whole quarter hour; a zone
that broke this would make the enumeration miss fires, and the test fail, not pass)."""

from __future__ import annotations

import calendar
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from cron_reference import Matcher, brute_force
from croniter import croniter  # type: ignore[import-untyped]  # no stubs published
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_cron_forms_properties import (
    ALL_DST_ZONES,
    Days,
    FormMatcher,
    compile_cron,
    dom_item_matches,
    fires_between,
    instants,
    local_midnight,
)

from tickwork.schedules import preview

QUARTER = timedelta(minutes=15)
NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
             "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
             "@hourly": "0 * * * *"}


@dataclass(frozen=True)
class Change:
    instant: datetime  # UTC
    day: date          # the local date of the instant, after the change
    gap: bool          # the clocks went forward (a skipped hour), else back (a repeated one)


@cache
def zone_changes(tz: str) -> tuple[Change, ...]:
    """The zone's offset changes in 2000-2040, found from each month's first instant and
    bisected to the second. A change undone within the same month is missed: these only pick
    the days to test on."""
    zone = ZoneInfo(tz)

    def offset(ts: int) -> timedelta | None:
        return datetime.fromtimestamp(ts, zone).utcoffset()

    starts = [int(datetime(y, m, 1, tzinfo=UTC).timestamp())
              for y in range(2000, 2041) for m in range(1, 13)]
    offsets = [offset(s) for s in starts]
    found = []
    for first, last, before, after in zip(starts, starts[1:], offsets, offsets[1:], strict=False):
        if before == after or before is None or after is None:
            continue
        low, high = first, last
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if offset(mid) == before else (low, mid)
        instant = datetime.fromtimestamp(high, UTC)
        found.append(Change(instant, instant.astimezone(zone).date(), after > before))
    return tuple(found)


def near_a_change(tz: str, start: datetime, end: datetime) -> bool:
    """Whether the zone changes its offset between ``start`` and ``end`` (all of 2000-2040
    when either is outside it: these tests stay inside)."""
    if tz == "UTC":
        return False
    if start.year < 2000 or end.year > 2040:
        return True
    return any(start <= c.instant <= end for c in zone_changes(tz))


def first_of_each_direction(tz: str, selects: Callable[[date], bool]) -> Iterator[Change]:
    """The first gap and the first repeat of the zone whose day ``selects`` picks."""
    for gap in (True, False):
        yield from [c for c in zone_changes(tz) if c.gap is gap and selects(c.day)][:1]


def _last(d: date) -> int:
    return calendar.monthrange(d.year, d.month)[1]


def _nth(d: date) -> str:
    return f"{d.isoweekday() % 7}#{(d.day - 1) // 7 + 1}"


def _nearest(d: date) -> str:
    """An `nW` that picks weekday ``d``, from a neighbouring day when one picks it."""
    return next(f"{n}W" for n in (d.day - 1, d.day + 1, d.day)
                if 1 <= n <= _last(d) and dom_item_matches(f"{n}W", d))


# Each form: which change days it can select, and its (day-of-month, day-of-week) fields there.
FORMS: dict[str, tuple[Callable[[date], bool], Callable[[date], tuple[str, str]]]] = {
    "L": (lambda d: d.day == _last(d), lambda d: ("L", "?")),
    "L-n": (lambda d: d.day < _last(d), lambda d: (f"L-{_last(d) - d.day}", "?")),
    "LW": (lambda d: dom_item_matches("LW", d), lambda d: ("LW", "?")),
    "nW": (lambda d: d.weekday() < 5, lambda d: (_nearest(d), "?")),
    "d#n": (lambda d: True, lambda d: ("?", _nth(d))),
    "dL": (lambda d: d.day + 7 > _last(d), lambda d: ("?", f"{d.isoweekday() % 7}L")),
}


def check(tz: str, change: Change, dom: str, dow: str, year: str = "") -> int:
    """A form's fires from 3 hours before the change to 3 after, at fixed times every half
    hour near it (once each, a skipped one at the gap's end) and at a wildcard's (each real instant,
    twice in a repeated hour): the same as the enumeration's."""
    days = Days(() if dom == "?" else (dom,), () if dow == "?" else (dow,), "?")
    years = None
    if year:  # written "low-high/step"
        span, step = year.split("/")
        low, high = span.split("-")
        years = frozenset(range(int(low), int(high) + 1, int(step)))
    start, end = change.instant - timedelta(hours=3), change.instant + timedelta(hours=3)
    # The fixed times name the hours the window can see (its ends are at most 3 hours and
    # one offset change from the change's local hour): fewer wall times to enumerate.
    hour = change.instant.astimezone(ZoneInfo(tz)).hour
    hours = ",".join(str(h % 24) for h in sorted({h % 24 for h in range(hour - 6, hour + 6)}))
    for times in (f"0 0,30 {hours}", "0 */30 *"):
        expr = " ".join([times, dom, "*", dow, year]).strip()
        reference = FormMatcher(f"{times} * * *", days, years)
        expected = brute_force(expr, tz, start, end, reference, step=QUARTER)
        assert fires_between(compile_cron(expr, tz), start, end) == expected, (tz, expr)
        assert expected, (tz, expr)  # the form picks the change's day: it fires around it
    return 1


def test_every_dst_zone_fires_each_form_on_its_change_days_as_g9_says() -> None:
    """Each zone, each form, on the first change day of each direction the form can select
    in 2000-2040; the year field on the `d#n` form, naming the change's year."""
    checked = dict.fromkeys([*FORMS, "year"], 0)
    for tz in ALL_DST_ZONES:
        for name, (selects, fields) in FORMS.items():
            for change in first_of_each_direction(tz, selects):
                checked[name] += check(tz, change, *fields(change.day))
        for change in first_of_each_direction(tz, lambda d: True):
            checked["year"] += check(tz, change, "?", _nth(change.day),
                                     f"{change.day.year - 2}-{change.day.year + 3}/2")
    zones = len(ALL_DST_ZONES)
    # Every change day has an `L-n` (or `L`), a `d#n` and a year; the tz database has no
    # change on a month's last weekday or on any Monday-Friday in most zones (they change on
    # a Sunday), so `LW` and `nW` are checked where it has.
    assert min(checked["L-n"], checked["d#n"], checked["year"]) >= 2 * zones - 10, checked
    assert checked["dL"] >= 1.4 * zones, checked
    assert checked["L"] >= zones // 2, checked
    assert checked["LW"] >= 5, checked
    assert checked["nW"] >= 10, checked


def test_every_dst_zone_fires_the_nicknames_on_its_change_days_as_g9_says() -> None:
    """`@hourly`, `@daily`, `@midnight` on every change day of 2000-2040's first gap and
    repeat, `@weekly` on those that are Sundays, `@monthly` and `@yearly` on those that are a
    1st: from 2 hours before the day's midnight to 30 hours later, as their cron forms."""
    checked = dict.fromkeys(NICKNAMES, 0)
    picks = {"@weekly": lambda d: d.isoweekday() == 7, "@monthly": lambda d: d.day == 1,
             "@yearly": lambda d: d.day == 1 and d.month == 1}
    picks["@annually"] = picks["@yearly"]
    for tz in ALL_DST_ZONES:
        zone = ZoneInfo(tz)
        for name, cron in NICKNAMES.items():
            for change in first_of_each_direction(tz, picks.get(name, lambda d: True)):
                start = local_midnight(change.day, zone) - timedelta(hours=2)
                end = start + timedelta(hours=30)
                expected = brute_force(cron, tz, start, end, Matcher(cron), step=QUARTER)
                assert fires_between(compile_cron(name, tz), start, end) == expected, (tz, name)
                checked[name] += bool(expected)
    zones = len(ALL_DST_ZONES)
    assert min(checked["@hourly"], checked["@daily"], checked["@midnight"]) >= 2 * zones - 10
    assert checked["@weekly"] >= zones, checked


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(NICKNAMES)), tz=st.sampled_from(("UTC", *ALL_DST_ZONES)),
       after=instants)
def test_nicknames_match_croniter_away_from_transitions(name: str, tz: str,
                                                        after: datetime) -> None:
    """Where croniter's DST handling is not in play, each nickname fires when croniter's
    does (croniter reads the same seven nicknames)."""
    zone = ZoneInfo(tz)
    reference = croniter(name, after.astimezone(zone))
    schedule, current, compared = compile_cron(name, tz), after, 0
    for _ in range(3):
        expected = reference.get_next(datetime).astimezone(UTC)
        if near_a_change(tz, current - timedelta(hours=3), expected + timedelta(hours=3)):
            break  # croniter's own DST handling differs; the test above covers this
        current = schedule.next_after(current)  # type: ignore[assignment]
        assert current == expected, (name, tz)
        compared += 1
    event(f"compared {compared} fire times")


def test_a_nickname_is_its_cron_form() -> None:
    after = datetime(2025, 3, 29, 20, tzinfo=UTC)
    for name, cron in NICKNAMES.items():
        assert preview(compile_cron(name, "Europe/Berlin"), after, 6) == preview(
            compile_cron(cron, "Europe/Berlin"), after, 6), name
