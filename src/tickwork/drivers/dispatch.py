"""The Dispatch seam: how due occurrences travel to workers, with one params object per method.

Dispatch only *delivers*; the store decides (DESIGN rule 1). Every occurrence is a row in the
store before its key is given to ``due_add``, and a dispatch may lose everything at any moment:
``epoch_check`` and the ``groups_created`` flag of a read say so, and the reconciler rebuilds the
due set from the store. A key is an opaque string chosen by the store integration (one per
occurrence); a key delivered twice costs one claim the store rejects, never a second run.

Due-ness is decided by the dispatch's own clock (Redis ``TIME``), so ``due_ms`` values are
milliseconds since the Unix epoch. Every driver passes ``tickwork.testing.conformance.dispatch``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from tickwork.frozen import fast_init

if TYPE_CHECKING:
    from tickwork.drivers.base import NewOccurrence
    from tickwork.models import Occurrence

# Bounds on the work one call may do (DESIGN rule 8).
MAX_PROMOTE = 1000
MAX_READ = 1000


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_ms(when: datetime) -> int:
    """An aware instant as whole milliseconds since the Unix epoch (naive means UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


MICROSECOND = timedelta(microseconds=1)


def micros(when: datetime) -> int:
    """An instant as whole microseconds since the Unix epoch, exactly (naive means UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - EPOCH) // MICROSECOND


def due_ms(when: datetime) -> int:
    """A due time as a due-set score: whole milliseconds, rounded up, so an occurrence due at
    12:00:00.0007 is promoted at 12:00:00.001, never at 12:00:00.000, when the store, asked to
    claim it, would still call it not due (and it would be re-armed a second later)."""
    return -(-micros(when) // 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


# One key per occurrence: ``job_id|<scheduled_at in integer microseconds>``. The store
# integration's encoding, here and nowhere else.
SEPARATOR = "|"


def occurrence_key(job_id: str, scheduled_at: datetime) -> str:
    """``job_id|<µs since the epoch>``: exact (no float), and sorts nowhere in particular."""
    return f"{job_id}{SEPARATOR}{micros(scheduled_at)}"


def parse_key(key: str) -> tuple[str, datetime]:
    """The (job_id, scheduled_at) of a key; ValueError if it is not one of ours."""
    job_id, sep, us = key.rpartition(SEPARATOR)
    if not sep or not job_id or not us.lstrip("-").isdigit():
        raise ValueError(f"not an occurrence key: {key!r}")
    return job_id, EPOCH + MICROSECOND * int(us)  # not timedelta(microseconds=): half the cost


@fast_init
@dataclass(frozen=True, slots=True)
class DueItem:
    """One occurrence to deliver once ``due_ms`` has passed on the dispatch's clock."""

    queue: str
    key: str
    due_ms: int
    priority: int = 0


@fast_init
@dataclass(frozen=True, slots=True)
class Entry:
    """A delivered occurrence key, pending for its consumer until acked, retried or
    dead-lettered. ``band`` is its priority band (0 is the highest)."""

    id: str
    band: int
    key: str
    due_ms: int
    delivery_count: int = 1


@dataclass(frozen=True, slots=True)
class DueAddParams:
    """Insert-if-absent: a key already waiting keeps its due time (a replay is a no-op)."""

    items: Sequence[DueItem]


@dataclass(frozen=True, slots=True)
class DueRebuildParams:
    """The reconciler's re-add of keys the store says are waiting; insert-if-absent too."""

    items: Sequence[DueItem]


@dataclass(frozen=True, slots=True)
class DuePromoteParams:
    """``backlog``: the most entries the queue's streams may hold that no worker got yet (0:
    no bound). With a bound, a burst waits in the due set, and when more keys are due than
    move, half of the move is the newest due (``redis/scripts/promote.lua``)."""

    queue: str
    limit: int = MAX_PROMOTE
    backlog: int = 0


@dataclass(frozen=True, slots=True)
class Promoted:
    """What one promote call moved, and when the next key is due (None: nothing waits).
    ``now_ms`` is the dispatch clock at the move, so a sleep never mixes two clocks."""

    moved: int
    next_due_ms: int | None
    now_ms: int
    held: bool = False  # the streams held a backlog's worth: nothing could move

    @property
    def next_in_ms(self) -> int | None:
        return None if self.next_due_ms is None else max(0, self.next_due_ms - self.now_ms)


@dataclass(frozen=True, slots=True)
class DueCountParams:
    queue: str


@dataclass(frozen=True, slots=True)
class EntryReadParams:
    """New entries for ``consumer``, highest band first; waits up to ``block_ms`` when none
    are ready (0: return at once)."""

    queue: str
    consumer: str
    count: int
    block_ms: int = 0


@dataclass(frozen=True, slots=True)
class EntryRead:
    """``groups_created`` > 0 means the dispatch had no consumer group for a band: first start,
    or the data was lost. The caller should tell the reconciler."""

    entries: list[Entry]
    groups_created: int = 0


@dataclass(frozen=True, slots=True)
class EntryAckParams:
    queue: str
    entries: Sequence[Entry]


@dataclass(frozen=True, slots=True)
class EntryRetryParams:
    """Ack the entry and put its key back in the due set at ``due_ms``, in one atomic move.
    The caller has written the retry to the store first (DESIGN rule 3)."""

    queue: str
    entry: Entry
    due_ms: int


@dataclass(frozen=True, slots=True)
class EntryTouchParams:
    """Long jobs: reset the entries' idle time so the rescuer does not reclaim them."""

    queue: str
    consumer: str
    entries: Sequence[Entry]


@dataclass(frozen=True, slots=True)
class EntryReclaimParams:
    """Take over entries idle for at least ``min_idle_ms`` (their consumer died or hung)."""

    queue: str
    consumer: str
    min_idle_ms: int
    count: int = 100


@dataclass(frozen=True, slots=True)
class EntryDeadLetterParams:
    """Move a poison entry to the queue's dead stream with ``reason``, and ack it, atomically."""

    queue: str
    entry: Entry
    reason: str


@dataclass(frozen=True, slots=True)
class DeadListParams:
    queue: str
    limit: int = 100


@dataclass(frozen=True, slots=True)
class DeadEntry:
    id: str
    band: int
    key: str
    reason: str
    delivery_count: int
    entry_id: str


@dataclass(frozen=True, slots=True)
class StreamTrimParams:
    """Drop entries that are delivered and acked; never a pending or undelivered one."""

    queue: str


@dataclass(frozen=True, slots=True)
class QueueStatsParams:
    queue: str


@dataclass(frozen=True, slots=True)
class QueueStats:
    due: int  # keys waiting for their due time
    ready: int  # delivered to no consumer yet
    pending: int  # delivered, not acked


@dataclass(frozen=True, slots=True)
class DispatchHealth:
    ok: bool
    problems: tuple[str, ...] = ()


class Dispatch(Protocol):
    """Delivers occurrence keys to workers. Every method is one bounded, atomic step."""

    async def close(self) -> None: ...

    async def due_add(self, p: DueAddParams) -> int:
        """Returns how many keys were new."""
        ...
    async def due_rebuild(self, p: DueRebuildParams) -> int: ...
    async def due_promote(self, p: DuePromoteParams) -> Promoted: ...
    async def due_count(self, p: DueCountParams) -> int: ...

    async def entry_read(self, p: EntryReadParams) -> EntryRead: ...
    async def entry_ack(self, p: EntryAckParams) -> int:
        """Returns how many entries were still pending."""
        ...
    async def entry_retry(self, p: EntryRetryParams) -> bool:
        """True if the entry was still pending. The key is re-armed either way."""
        ...
    async def entry_touch(self, p: EntryTouchParams) -> list[Entry]:
        """Returns the entries no longer pending (acked or dead-lettered elsewhere)."""
        ...
    async def entry_reclaim(self, p: EntryReclaimParams) -> list[Entry]: ...
    async def entry_dead_letter(self, p: EntryDeadLetterParams) -> bool:
        """True if moved; False if the entry was no longer pending (someone else settled it)."""
        ...

    async def dead_list(self, p: DeadListParams) -> list[DeadEntry]: ...
    async def stream_trim(self, p: StreamTrimParams) -> int: ...
    async def queue_stats(self, p: QueueStatsParams) -> QueueStats: ...

    async def epoch_check(self) -> bool:
        """False when the dispatch lost its data since this instance last looked (or has no
        epoch yet: a first start): the caller must reconcile from the store."""
        ...
    async def health(self) -> DispatchHealth: ...


def due_item(o: NewOccurrence | Occurrence) -> DueItem:
    """The due-set entry of a waiting occurrence."""
    return DueItem(queue=o.queue, key=occurrence_key(o.job_id, o.scheduled_at),
                   due_ms=due_ms(o.due_at), priority=o.priority)
