"""Limits on what jobs call, across every worker: the values, the arithmetic and the seam.

Four kinds (docs/limits.md, docs/namespaces.md):

- a queue's ``max_running``: at most N attempts of the queue running at once. The store counts
  running attempts whose lease has not expired, so a crashed worker's slots come back when its
  leases do (the same fence as everything else: the lease and the attempt number);
- a rate with a burst, on a queue or on a named ``limit_key`` that jobs share whatever their
  queue: a token bucket of ``burst`` tokens refilled at the rate, one token per start. In any
  window of ``w`` seconds at most ``burst + rate * w`` attempts start;
- a job's ``max_concurrency`` (overlap ``allow_all``): at most N of its runs at once;
- a namespace's ``max_runs_per_hour`` quota: at most N attempts of its jobs started per UTC
  clock hour. The store counts the starts per (namespace, hour) in the claim transaction; a
  run it holds is looked at again when the hour turns.

A claim that a limit holds back leaves the run waiting, its attempt counter untouched; the
store notes when a limit first held it (``limited_at``), the catch-up window no longer counts
against it, and its start lateness is reported apart ("held by limit").

Pure here: ``Budget`` is what a claim may start, which ``claiming.plan_claims`` spends; each
driver reads and writes the limits inside its claim transaction (``LimitStore``).
Limits are keyed by queue name and limit key alone, so another part of the key can be added.

A queue's and a key's row may name the namespace that owns it (NULL: shared by every
namespace): its owner's tokens change it, jobs of other namespaces cannot name it, and their
listings leave it out (client/owners.py). The claim does not look at owners.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, Protocol

from tickwork.drivers.namespaces import NAMESPACE_NAME, NAMESPACE_RULE
from tickwork.drivers.rows import RowLike
from tickwork.errors import TickworkError, ValidationError

MAX_RUNNING_RANGE = (1, 1_000_000)
RATE_COUNT_RANGE = (1, 1_000_000)
BURST_RANGE = (1, 1_000_000)
_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
          "h": 3600.0, "hour": 3600.0}
_RATE = re.compile(r"\s*(\d+)\s*/\s*([a-z]+)\s*")
RATE_RULE = "a rate is N/s, N/min or N/h (e.g. 50/s, 100/min)"
QUEUE_BUCKET, KEY_BUCKET = "queue", "key"


class LimitNotFound(TickworkError, LookupError):
    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"no limit named {key!r}")


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` starts per ``seconds`` (1, 60 or 3600)."""

    count: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.count / self.seconds

    def __str__(self) -> str:
        unit = {1.0: "s", 60.0: "min", 3600.0: "h"}.get(self.seconds)
        return f"{self.count}/{unit}" if unit else f"{self.count}/{self.seconds:g}s"


def parse_rate(text: str) -> Rate:
    """``50/s``, ``100/min``, ``10/h``; ValueError saying what a rate looks like."""
    m = _RATE.fullmatch(text.lower())
    if m is None or m.group(2) not in _UNITS:
        raise ValueError(f"{text!r} is not a rate: {RATE_RULE}")
    count = int(m.group(1))
    low, high = RATE_COUNT_RANGE
    if not low <= count <= high:
        raise ValueError(f"{text!r}: the count must be between {low} and {high}")
    return Rate(count, _UNITS[m.group(2)])


def default_burst(rate: Rate) -> int:
    """A rate without a burst may start one period's worth at once."""
    return rate.count


@dataclass(frozen=True, slots=True)
class Bucket:
    """A token bucket as the store keeps it: the tokens left at ``at`` (None: full)."""

    tokens: float
    at: datetime | None


@dataclass(frozen=True, slots=True)
class RateLimit:
    rate: Rate
    burst: int

    def tokens(self, bucket: Bucket, now: datetime) -> float:
        """Tokens at ``now``: refilled at the rate since ``at``, at most ``burst``. A clock
        behind the last writer's refills nothing (time never runs backwards here)."""
        if bucket.at is None:
            return float(self.burst)
        elapsed = max(0.0, (now - bucket.at).total_seconds())
        return min(float(self.burst), bucket.tokens + elapsed * self.rate.per_second)

    def take(self, bucket: Bucket, now: datetime, count: int) -> Bucket:
        at = now if bucket.at is None or now > bucket.at else bucket.at
        return Bucket(self.tokens(bucket, now) - count, at)

    def wait_seconds(self, bucket: Bucket, now: datetime) -> float:
        """How long until one whole token is there again."""
        missing = 1.0 - self.tokens(bucket, now)
        return max(0.0, missing / self.rate.per_second)


@dataclass(frozen=True, slots=True)
class LimitState:
    """One limit as the store has it: a queue's (``kind`` queue) or a key's (``kind`` key)."""

    kind: str
    name: str
    max_running: int | None = None
    rate: RateLimit | None = None
    bucket: Bucket = Bucket(0.0, None)

    @property
    def bucket_id(self) -> tuple[str, str]:
        return (self.kind, self.name)


def hour_start(now: datetime) -> datetime:
    """The top of ``now``'s UTC clock hour: a namespace's runs are counted per hour from it."""
    return now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def next_hour(now: datetime) -> datetime:
    return hour_start(now) + timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class HourQuota:
    """A namespace's ``max_runs_per_hour`` as a claim reads it: ``used`` attempts of its jobs
    started in the current hour (as counted by claims, in ``namespace_runs``)."""

    namespace: str
    limit: int
    used: int


@dataclass(slots=True)
class Budget:
    """What a claim may start under the limits it read: starts left per queue under
    ``max_running``, per bucket under its rate and per namespace under its hourly quota. A
    queue, key or namespace that is absent is not limited. ``spend`` counts what the plan
    takes; ``taken`` and ``runs_taken`` are what to write back."""

    slots: dict[str, int] = field(default_factory=dict)  # queue -> starts left
    tokens: dict[tuple[str, str], int] = field(default_factory=dict)  # bucket -> starts left
    taken: dict[tuple[str, str], int] = field(default_factory=dict)
    # bucket -> (its tokens when read, its refill per second): when the next token comes
    refill: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)  # namespace -> starts left this hour
    runs_taken: dict[str, int] = field(default_factory=dict)
    hour_wait: float = 0.0  # seconds from the claim's now to the top of the next hour

    def allows(self, queue: str, key: str | None, namespace: str | None = None) -> bool:
        if self.slots.get(queue, 1) <= 0 or self.tokens.get((QUEUE_BUCKET, queue), 1) <= 0:
            return False
        if namespace is not None and self.runs.get(namespace, 1) <= 0:
            return False
        return key is None or self.tokens.get((KEY_BUCKET, key), 1) > 0

    def spend(self, queue: str, key: str | None, namespace: str | None = None) -> None:
        if queue in self.slots:
            self.slots[queue] -= 1
        for bucket in ((QUEUE_BUCKET, queue), (KEY_BUCKET, key or "")):
            if bucket in self.tokens:
                self.tokens[bucket] -= 1
                self.taken[bucket] = self.taken.get(bucket, 0) + 1
        if namespace is not None and namespace in self.runs:
            self.runs[namespace] -= 1
            self.runs_taken[namespace] = self.runs_taken.get(namespace, 0) + 1

    def retry_seconds(self, queue: str, key: str | None, default: float,
                      namespace: str | None = None) -> float:
        """When a run held back by these limits may be looked at again: for a namespace
        whose hour is used up, when the hour turns."""
        waits = []
        for b in ((QUEUE_BUCKET, queue), (KEY_BUCKET, key or "")):
            if b in self.refill and self.tokens.get(b, 1) <= 0:
                tokens, per_second = self.refill[b]
                waits.append((self.taken.get(b, 0) + 1 - tokens) / per_second)
        if namespace is not None and self.runs.get(namespace, 1) <= 0:
            waits.append(self.hour_wait)
        return max(default, *waits) if waits else default


def budget_of(limits: list[LimitState], running: dict[str, int], now: datetime,
              hours: Sequence[HourQuota] = ()) -> Budget:
    """The budget these limits leave, with ``running`` the unexpired running attempts of each
    limited queue and ``hours`` the hourly quotas of the candidates' namespaces."""
    budget = Budget(runs={h.namespace: max(0, h.limit - h.used) for h in hours},
                    hour_wait=(next_hour(now) - now).total_seconds())
    for limit in limits:
        if limit.kind == QUEUE_BUCKET and limit.max_running is not None:
            budget.slots[limit.name] = max(0, limit.max_running - running.get(limit.name, 0))
        if limit.rate is not None:
            budget.tokens[limit.bucket_id] = max(0, math.floor(
                limit.rate.tokens(limit.bucket, now) + 1e-9))
            budget.refill[limit.bucket_id] = (limit.rate.tokens(limit.bucket, now),
                                              limit.rate.rate.per_second)
    return budget


def spent_buckets(limits: list[LimitState], budget: Budget,
                  now: datetime) -> list[tuple[LimitState, Bucket]]:
    """The new state of each bucket the plan drew from."""
    out = []
    for limit in limits:
        count = budget.taken.get(limit.bucket_id, 0)
        if limit.rate is not None and count:
            out.append((limit, limit.rate.take(limit.bucket, now, count)))
    return out


# --- the admin side: setting limits and reading them back --------------------------------


class Keep(Enum):
    """An owner left as it is (a new queue or key is shared)."""

    KEEP = "keep"


KEEP = Keep.KEEP
Owner = str | None | Keep  # a namespace, None (shared), or KEEP


def check_owner(value: Owner, field: str = "namespace") -> Owner:
    """A namespace that may own a queue or key, None (shared) or KEEP."""
    if value is KEEP or value is None:
        return value
    if not isinstance(value, str) or not NAMESPACE_NAME.fullmatch(value):
        raise ValidationError(field, NAMESPACE_RULE)
    return value




@dataclass(frozen=True, slots=True)
class QueueLimitsSetParams:
    """Set a queue's limits; None leaves a value off (unlimited). The bucket starts full.
    With ``set_namespace``, its owner becomes ``namespace`` (None: shared); without, the
    owner stays (a new row is shared)."""

    name: str
    now: datetime
    max_running: int | None = None
    rate: Rate | None = None
    burst: int | None = None  # None: default_burst(rate)
    namespace: str | None = None
    set_namespace: bool = False


@dataclass(frozen=True, slots=True)
class KeyLimitSetParams:
    """A key's rate; its owner as ``QueueLimitsSetParams``'."""

    key: str
    rate: Rate
    now: datetime
    burst: int | None = None
    namespace: str | None = None
    set_namespace: bool = False


@dataclass(frozen=True, slots=True)
class KeyLimitInfo:
    key: str
    rate: Rate
    burst: int
    tokens: float  # at the ``now`` it was read
    namespace: str | None = None  # the namespace that owns it; None: shared


@dataclass(frozen=True, slots=True)
class LimitOwners:
    """The queues and keys a namespace owns (name -> namespace); the others are shared."""

    queues: dict[str, str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)


def limit_owners_of(rows: Iterable[RowLike]) -> LimitOwners:
    """From ``limit_owners`` rows (kind, name, namespace)."""
    owners = LimitOwners()
    for row in rows:
        (owners.queues if row["kind"] == QUEUE_BUCKET else owners.keys)[row["name"]] = \
            row["namespace"]
    return owners


class LimitStore(Protocol):
    """Limits as the admin side sets them; claims read them in their own transaction."""

    async def queue_limits_set(self, p: QueueLimitsSetParams) -> None: ...
    async def key_limit_set(self, p: KeyLimitSetParams) -> KeyLimitInfo: ...
    async def key_limit_list(self, now: datetime,
                             namespace: str | None = None) -> list[KeyLimitInfo]:
        """Every key; with ``namespace``, the shared ones and that namespace's only."""
        ...
    async def limit_owners(self) -> LimitOwners:
        """Which queues and keys are owned, and by which namespace."""
        ...
    async def key_limit_delete(self, key: str) -> None:
        """Raises LimitNotFound."""
        ...


def limit_state(kind: str, row: RowLike, at: datetime | None) -> LimitState:
    """A limit from its stored columns (name, max_running, rate_count, rate_seconds, burst,
    tokens); ``at`` is the row's tokens_at, decoded."""
    rate = None
    count, seconds = row["rate_count"], row["rate_seconds"]
    if count is not None and seconds is not None:
        rate = RateLimit(Rate(count, seconds), row["burst"] or count)
    return LimitState(kind, row["name"], row["max_running"], rate,
                      Bucket(row["tokens"] or 0.0, at))


def queue_limit_args(p: QueueLimitsSetParams) -> dict[str, Any]:
    """The stored columns of a queue's limits."""
    return {"name": p.name, "now": p.now, "max_running": p.max_running,
            "rate_count": p.rate.count if p.rate else None,
            "rate_seconds": p.rate.seconds if p.rate else None,
            "burst": (p.burst or default_burst(p.rate)) if p.rate else None,
            "namespace": p.namespace if p.set_namespace else None,
            "set_namespace": p.set_namespace}


def key_limit_args(p: KeyLimitSetParams) -> dict[str, Any]:
    return {"key": p.key, "now": p.now, "rate_count": p.rate.count,
            "rate_seconds": p.rate.seconds, "burst": p.burst or default_burst(p.rate),
            "max_running": None, "namespace": p.namespace if p.set_namespace else None,
            "set_namespace": p.set_namespace}


def key_limit_info(row: RowLike, at: datetime | None, now: datetime) -> KeyLimitInfo:
    state = limit_state(KEY_BUCKET, row, at)
    assert state.rate is not None  # a key's rate is NOT NULL
    return KeyLimitInfo(state.name, state.rate.rate, state.rate.burst,
                        state.rate.tokens(state.bucket, now), row["namespace"])
