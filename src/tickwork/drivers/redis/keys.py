"""The whole Redis keyspace of tickwork, in one place.

Every key a single Lua call touches shares one hash tag, ``{<prefix>:<queue>}``, so each queue's
keys live in one Redis Cluster slot and every script runs on one node:

===============================  =========  ======================================================
key                              type       holds
===============================  =========  ======================================================
``{p:q}:due``                    zset       member ``<band>|<key>``, score = due time in ms
``{p:q}:s:<band>``               stream     fields ``k`` (key), ``d`` (due ms); band 0 is highest
``{p:q}:dead``                   stream     poison entries: ``k``, ``reason``, ``n`` (deliveries),
                                            ``b`` (band), ``e`` (original entry id); capped
``p:epoch``                      string     a random value set once; gone or changed = data lost
===============================  =========  ======================================================

Each band stream has one consumer group, ``GROUP``. The default prefix is ``tickwork``; tests use
a prefix of their own so they can run side by side on one Redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

DEFAULT_PREFIX = "tickwork"
GROUP = "tickwork"
# Lower bounds of the priority bands, highest first; a priority below the last one falls in an
# extra, lowest band. The default gives 4 bands: >= 10, 1..9, 0, < 0.
DEFAULT_BAND_FLOORS: tuple[int, ...] = (10, 1, 0)

_FORBIDDEN = frozenset("{}")


def _check(what: str, value: str) -> None:
    if not value:
        raise ValueError(f"{what} must not be empty")
    bad = _FORBIDDEN.intersection(value)
    if bad:
        raise ValueError(f"{what} {value!r} must not contain {''.join(sorted(bad))!r}: braces "
                         "would break the Redis Cluster hash tag")


@dataclass(frozen=True, slots=True)
class Keyspace:
    prefix: str = DEFAULT_PREFIX
    band_floors: tuple[int, ...] = DEFAULT_BAND_FLOORS
    _streams: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False,
                                                 compare=False, repr=False)

    def __post_init__(self) -> None:
        _check("prefix", self.prefix)
        if list(self.band_floors) != sorted(self.band_floors, reverse=True) or len(
                set(self.band_floors)) != len(self.band_floors):
            raise ValueError(f"band_floors {self.band_floors} must be strictly decreasing")

    @property
    def bands(self) -> int:
        return len(self.band_floors) + 1

    def band_of(self, priority: int) -> int:
        """The band of a priority: 0 for the highest."""
        for band, floor in enumerate(self.band_floors):
            if priority >= floor:
                return band
        return len(self.band_floors)

    def tag(self, queue: str) -> str:
        _check("queue", queue)
        return f"{{{self.prefix}:{queue}}}"

    def due(self, queue: str) -> str:
        return f"{self.tag(queue)}:due"

    def stream(self, queue: str, band: int) -> str:
        return f"{self.tag(queue)}:s:{band}"

    def streams(self, queue: str) -> tuple[str, ...]:
        """Every band stream of the queue, highest band first."""
        streams = self._streams.get(queue)
        if streams is None:
            streams = self._streams[queue] = tuple(
                self.stream(queue, band) for band in range(self.bands))
        return streams

    def dead(self, queue: str) -> str:
        return f"{self.tag(queue)}:dead"

    @property
    def epoch(self) -> str:
        return f"{self.prefix}:epoch"

    def patterns(self) -> Sequence[str]:
        """SCAN patterns that match every key of this prefix (for cleanup in tests)."""
        return (f"{{{self.prefix}:*", f"{self.prefix}:*")


def member(band: int, key: str) -> str:
    """A due-set member: what ``promote.lua`` needs to XADD it to the right stream."""
    return f"{band}|{key}"


def parse_member(value: str) -> tuple[int, str]:
    band, _, key = value.partition("|")
    return int(band), key
