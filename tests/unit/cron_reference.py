"""Reference answers for cron property tests: which wall times an expression matches (from
cronsim's independent parser), a zone's offset changes, and every fire by enumeration (G9)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from cronsim import CronSim

MINUTE = timedelta(minutes=1)


def is_fixed(expr: str) -> bool:
    parts = expr.split()
    time_fields = parts[:3] if len(parts) >= 6 else parts[:2]
    return all("*" not in f and "/" not in f for f in time_fields)


class Matcher:
    """Whether a local wall time matches, from cronsim's parsed fields (an independent parser)."""

    def __init__(self, expr: str) -> None:
        parts = expr.replace("?", "*").split()
        if len(parts) == 5:
            parts.insert(0, "0")
        self.sim = CronSim(" ".join(parts), datetime(2000, 1, 1))

    def __call__(self, wall: datetime) -> bool:
        sim = self.sim
        return (wall.second in sim.seconds and wall.minute in sim.minutes
                and wall.hour in sim.hours and wall.month in sim.months
                and sim.match_day(wall.date()))


@lru_cache(maxsize=64)
def transitions(tz: str, year: int) -> tuple[datetime, ...]:
    """Instants in ``year`` where the zone's UTC offset changes (to the second)."""
    zone = ZoneInfo(tz)

    def offset(t: datetime) -> timedelta | None:
        return t.astimezone(zone).utcoffset()

    found = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    while t.year == year:
        later = t + timedelta(hours=1)
        if offset(later) != offset(t):
            low, high = t, later
            while high - low > timedelta(seconds=1):
                mid = low + (high - low) // 2
                low, high = (mid, high) if offset(mid) == offset(low) else (low, mid)
            found.append(high)
        t = later
    return tuple(found)


def transition_between(tz: str, start: datetime, end: datetime) -> bool:
    return any(start <= t <= end for year in range(start.year, end.year + 1)
               for t in transitions(tz, year))


def brute_force(expr: str, tz: str, start: datetime, end: datetime,
                match: Matcher | None = None, step: timedelta = MINUTE) -> list[datetime]:
    """Every fire in ``(start, end)`` by enumeration (G9): each real instant whose local time
    matches, or for a fixed-time expression each matching local time, resolved once. A
    wildcard's instants are counted every ``step`` from a UTC multiple of it: a quarter hour is
    enough when the minutes are multiples of 15 and the zone's offsets whole quarter hours."""
    zone, match = ZoneInfo(tz), match or Matcher(expr)
    seconds = sorted(match.sim.seconds)
    if not is_fixed(expr):
        first = start - (start - datetime(2000, 1, 1, tzinfo=UTC)) % step
        instants = (first + step * i + timedelta(seconds=s)
                    for i in range(int((end - first) / step) + 1) for s in seconds)
        return [u for u in instants
                if start < u < end and match(u.astimezone(zone).replace(tzinfo=None))]
    fires = set()
    for day in range(-2, (end - start).days + 3):
        d = start.astimezone(zone).date() + timedelta(days=day)
        for hour in match.sim.hours:
            for minute in match.sim.minutes:
                for second in seconds:
                    wall = datetime(d.year, d.month, d.day, hour, minute, second)
                    if match(wall):
                        fires.add(resolve_fixed(wall, zone))
    return sorted(f for f in fires if start < f < end)


def resolve_fixed(wall: datetime, zone: ZoneInfo) -> datetime:
    """A wall time's first instance, or the first instant after the gap that skipped it."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # Walk the minutes from before the jump (these zones change offset on a minute).
    instant = wall.replace(tzinfo=zone, fold=1).astimezone(UTC).replace(second=0)
    while instant.astimezone(zone).replace(tzinfo=None) < wall:
        instant += MINUTE
    return instant
