"""RedisDispatch: the Dispatch seam on Redis (redis.asyncio + hiredis).

A due sorted set and one stream per priority band for each queue (the keyspace is in
``keys.py``); every move between them is one Lua call (``scripts/*.lua``). Redis only delivers:
the store decides, and the reconciler rebuilds Redis from it after a loss (DESIGN rule 1).
"""

from __future__ import annotations

import logging
import secrets
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from tickwork.drivers.dispatch import (
    MAX_PROMOTE,
    MAX_READ,
    DeadEntry,
    DeadListParams,
    DispatchHealth,
    DueAddParams,
    DueCountParams,
    DueItem,
    DuePromoteParams,
    DueRebuildParams,
    Entry,
    EntryAckParams,
    EntryDeadLetterParams,
    EntryRead,
    EntryReadParams,
    EntryReclaimParams,
    EntryRetryParams,
    EntryTouchParams,
    Promoted,
    QueueStats,
    QueueStatsParams,
    StreamTrimParams,
)
from tickwork.drivers.redis.connect import (
    RedisClient,
    decodes_responses,
    maxmemory_policies,
    open_client,
    ping,
)
from tickwork.drivers.redis.errors import translate
from tickwork.drivers.redis.keys import (
    DEFAULT_BAND_FLOORS,
    DEFAULT_PREFIX,
    GROUP,
    Keyspace,
    member,
)
from tickwork.drivers.redis.lua import Scripts
from tickwork.frozen import direct

log = logging.getLogger("tickwork.dispatch.redis")

PIPELINE_CHUNK = 1000  # members per ZADD in a pipelined due_add
MAX_BLOCK_MS = 60_000
_new_entry = direct(Entry)  # one per entry read: without a class call's keyword dict


@dataclass(frozen=True, slots=True)
class RedisHealth(DispatchHealth):
    maxmemory_policy: str | None = None


def _fields(flat: Sequence[Any]) -> dict[str, str]:
    return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}


def _int(value: object, default: int = 0) -> int:
    try:
        return int(str(value))
    except ValueError:
        return default


class RedisDispatch:
    """Owns its client when made with ``from_url``; ``close()`` then closes it."""

    def __init__(
        self,
        client: RedisClient,
        *,
        prefix: str = DEFAULT_PREFIX,
        band_floors: tuple[int, ...] = DEFAULT_BAND_FLOORS,
        dead_maxlen: int = 10_000,
        fair_every: int = 8,
        owns_client: bool = False,
    ) -> None:
        """``fair_every``: every n-th read of a queue starts at a lower band (rotating), so a
        busy high band cannot starve the others for ever; 0 reads strictly by priority."""
        if not decodes_responses(client):
            raise ValueError("RedisDispatch needs a client made with decode_responses=True")
        if dead_maxlen < 1:
            raise ValueError(f"dead_maxlen ({dead_maxlen}) must be at least 1")
        if fair_every < 0:
            raise ValueError(f"fair_every ({fair_every}) must not be negative")
        self.client = client
        self.keys = Keyspace(prefix, band_floors)
        self.dead_maxlen = dead_maxlen
        self.fair_every = fair_every
        self._owns_client = owns_client
        self._scripts = Scripts.register(client)
        self._reads: dict[str, int] = defaultdict(int)
        self._cursors: dict[str, list[str]] = {}
        self._epoch: str | None = None

    @classmethod
    def from_url(cls, url: str, *, block_ms: int = 1000, **options: Any) -> RedisDispatch:
        """A RedisDispatch on a client of its own. The socket timeout outlasts a blocking read
        of ``block_ms``, so a hung Redis (stopped, partitioned) surfaces as
        DispatchUnavailable instead of a hang. ``url`` may name one server, a Redis Cluster
        or a Sentinel-managed master (``tickwork.drivers.redis_url``)."""
        client = open_client(url, socket_connect_timeout=2,
                             socket_timeout=max(2.0, block_ms / 1000 + 1.0),
                             health_check_interval=30)
        return cls(client, owns_client=True, **options)

    async def close(self) -> None:
        if self._owns_client:
            await self.client.aclose()

    # -- the due set -------------------------------------------------------------------------

    async def due_add(self, p: DueAddParams) -> int:
        """ZADD NX: a key keeps the due time it has. Due times of an occurrence never change
        except on a retry, and retries re-arm through ``entry_retry``; so NX makes a replay
        (a planner that re-sends after a failed pipeline, the reconciler racing the planner) a
        no-op, and never moves a re-armed retry back to an earlier time. GT would do the same
        for earlier times but let a stale later one move a key on; nothing needs that."""
        return await self._zadd_nx(p.items, "due_add")

    async def due_rebuild(self, p: DueRebuildParams) -> int:
        """ZADD NX as well. A key that is also pending or ready in a stream is added again:
        harmless beyond one wasted claim, because the worker's store claim rejects an
        occurrence already claimed or finished. Keeping it simple beats scanning streams."""
        return await self._zadd_nx(p.items, "due_rebuild")

    async def _zadd_nx(self, items: Sequence[DueItem], operation: str) -> int:
        if not items:
            return 0
        by_queue: dict[str, dict[str, int]] = defaultdict(dict)
        for item in items:
            by_queue[item.queue][member(self.keys.band_of(item.priority), item.key)] = item.due_ms
        with translate(operation):
            pipe = self.client.pipeline(transaction=False)
            for queue, members in by_queue.items():
                due, pairs = self.keys.due(queue), list(members.items())
                for start in range(0, len(pairs), PIPELINE_CHUNK):
                    pipe.zadd(due, dict(pairs[start:start + PIPELINE_CHUNK]), nx=True)
            return sum(_int(n) for n in await pipe.execute())

    async def due_promote(self, p: DuePromoteParams) -> Promoted:
        if not 0 < p.limit <= MAX_PROMOTE:
            raise ValueError(f"limit ({p.limit}) must be in 1..{MAX_PROMOTE}")
        if p.backlog < 0:
            raise ValueError(f"backlog ({p.backlog}) must be 0 (no bound) or more")
        keys = [self.keys.due(p.queue), *self.keys.streams(p.queue)]
        with translate("due_promote"):
            moved, next_due, now, held = await self._scripts.promote(
                keys=keys, args=[p.limit, p.backlog, GROUP])
        return Promoted(moved=_int(moved), now_ms=_int(now),
                        next_due_ms=int(float(next_due)) if next_due else None,
                        held=bool(_int(held)))

    async def due_count(self, p: DueCountParams) -> int:
        with translate("due_count"):
            return await self.client.zcard(self.keys.due(p.queue))

    # -- entries -----------------------------------------------------------------------------

    def _read_order(self, queue: str) -> list[int]:
        bands = list(range(self.keys.bands))
        n = self._reads[queue] = self._reads[queue] + 1
        if self.fair_every and n % self.fair_every == 0:
            shift = 1 + (n // self.fair_every) % (len(bands) - 1) if len(bands) > 1 else 0
            bands = bands[shift:] + bands[:shift]
        return bands

    def _entry(self, band: int, entry_id: str, flat: Sequence[Any], count: int = 1) -> Entry:
        fields = _fields(flat)
        return _new_entry(id=str(entry_id), band=band, key=fields.get("k", ""),
                     due_ms=_int(fields.get("d", "0")), delivery_count=count)

    async def _read_now(self, queue: str, consumer: str, count: int) -> tuple[list[Entry], int]:
        order = self._read_order(queue)
        streams = [self.keys.stream(queue, band) for band in order]
        reply = await self._scripts.read(keys=streams, args=[GROUP, consumer, count])
        return [self._read_entry(order, row) for row in reply[1:]], _int(reply[0])

    def _read_entry(self, order: list[int], row: Sequence[Any]) -> Entry:
        """One row of read.lua: {stream index, id, field, value, ...}. The fields the feed
        writes, ``k`` then ``d``, are read in place; any other layout field by field."""
        if len(row) == 6 and row[2] == "k" and row[4] == "d":
            try:
                return _new_entry(row[1], order[row[0] - 1], row[3], int(row[5]), 1)
            except (TypeError, ValueError):
                pass  # not the numbers they should be: read as any other layout
        return self._entry(order[_int(row[0]) - 1], row[1], row[2:])

    async def entry_read(self, p: EntryReadParams) -> EntryRead:
        """Highest band first, in one non-blocking Lua call. Only when every band is empty does
        it block (at most ``block_ms``) on all bands at once for one entry, then tops up with
        another prioritised read; so a low band never makes a high one wait."""
        if not 0 < p.count <= MAX_READ:
            raise ValueError(f"count ({p.count}) must be in 1..{MAX_READ}")
        if not 0 <= p.block_ms <= MAX_BLOCK_MS:
            raise ValueError(f"block_ms ({p.block_ms}) must be in 0..{MAX_BLOCK_MS}")
        with translate("entry_read"):
            entries, created = await self._read_now(p.queue, p.consumer, p.count)
            if entries or p.block_ms == 0:
                return EntryRead(entries, created)
            try:
                woke = await self._read_blocking(p.queue, p.consumer, p.block_ms)
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                # Lost between the two calls: the prioritised read makes the groups again.
                entries, more = await self._read_now(p.queue, p.consumer, p.count)
                return EntryRead(entries, created + more)
            if woke and len(woke) < p.count:
                more_entries, more = await self._read_now(p.queue, p.consumer,
                                                          p.count - len(woke))
                woke, created = woke + more_entries, created + more
            return EntryRead(await self._give_back(p.queue, woke, p.count), created)

    async def _read_blocking(self, queue: str, consumer: str, block_ms: int) -> list[Entry]:
        streams = self.keys.streams(queue)
        band_of = {s: band for band, s in enumerate(streams)}
        reply = await self.client.xreadgroup(GROUP, consumer, dict.fromkeys(streams, ">"),
                                             count=1, block=block_ms)
        entries = []
        for stream, items in _stream_replies(reply):
            for entry_id, fields in items:
                flat = [x for kv in (fields or {}).items() for x in kv]
                entries.append(self._entry(band_of[str(stream)], str(entry_id), flat))
        entries.sort(key=lambda e: e.band)
        return entries

    async def _give_back(self, queue: str, entries: list[Entry], count: int) -> list[Entry]:
        """A blocking read that found entries already there returns one per band, which may
        be more than asked; the extras go back to the due set, due at once, atomically."""
        for extra in entries[count:]:
            await self._scripts.retry(keys=[self.keys.stream(queue, extra.band),
                                            self.keys.due(queue)],
                                      args=[GROUP, extra.id, member(extra.band, extra.key), 0])
        return entries[:count]

    def _by_band(self, entries: Iterable[Entry]) -> dict[int, list[Entry]]:
        bands: dict[int, list[Entry]] = defaultdict(list)
        for entry in entries:
            bands[entry.band].append(entry)
        return bands

    async def entry_ack(self, p: EntryAckParams) -> int:
        if not p.entries:
            return 0
        with translate("entry_ack"):
            pipe = self.client.pipeline(transaction=False)
            for band, entries in self._by_band(p.entries).items():
                pipe.xack(self.keys.stream(p.queue, band), GROUP, *(e.id for e in entries))
            return sum(_int(n) for n in await pipe.execute())

    async def entry_retry(self, p: EntryRetryParams) -> bool:
        e = p.entry
        with translate("entry_retry"):
            acked = await self._scripts.retry(
                keys=[self.keys.stream(p.queue, e.band), self.keys.due(p.queue)],
                args=[GROUP, e.id, member(e.band, e.key), p.due_ms])
        return _int(acked) == 1

    async def entry_touch(self, p: EntryTouchParams) -> list[Entry]:
        """XCLAIM to the same consumer with min-idle 0 and JUSTID: resets the idle time without
        counting a delivery. An entry not returned is no longer pending."""
        if not p.entries:
            return []
        bands = self._by_band(p.entries)
        with translate("entry_touch"):
            pipe = self.client.pipeline(transaction=False)
            for band, entries in bands.items():
                pipe.xclaim(self.keys.stream(p.queue, band), GROUP, p.consumer, 0,
                            [e.id for e in entries], justid=True)
            replies = await pipe.execute()
        held = {str(i) for reply in replies for i in reply}
        return [e for e in p.entries if e.id not in held]

    async def entry_reclaim(self, p: EntryReclaimParams) -> list[Entry]:
        if not 0 < p.count <= MAX_READ:
            raise ValueError(f"count ({p.count}) must be in 1..{MAX_READ}")
        cursors = self._cursors.get(p.queue) or ["0-0"] * self.keys.bands
        with translate("entry_reclaim"):
            reply = await self._scripts.reclaim(
                keys=list(self.keys.streams(p.queue)),
                args=[GROUP, p.consumer, p.min_idle_ms, p.count, *cursors])
        self._cursors[p.queue] = [str(c) for c in reply[0]]
        return [self._entry(_int(row[0]) - 1, row[1], row[3:], count=_int(row[2], 1))
                for row in reply[1:]]

    async def entry_dead_letter(self, p: EntryDeadLetterParams) -> bool:
        e = p.entry
        with translate("entry_dead_letter"):
            moved = await self._scripts.dead(
                keys=[self.keys.stream(p.queue, e.band), self.keys.dead(p.queue)],
                args=[GROUP, e.id, e.key, p.reason, e.band, self.dead_maxlen])
        return _int(moved) == 1

    async def dead_list(self, p: DeadListParams) -> list[DeadEntry]:
        """Newest first."""
        with translate("dead_list"):
            rows = await self.client.xrevrange(self.keys.dead(p.queue), count=p.limit)
        dead = []
        for entry_id, raw in rows or []:
            f = {str(k): str(v) for k, v in (raw or {}).items()}
            dead.append(DeadEntry(
                id=str(entry_id), key=f.get("k", ""), reason=f.get("reason", ""),
                delivery_count=_int(f.get("n", "0")), band=_int(f.get("b", "0")),
                entry_id=f.get("e", "")))
        return dead

    # -- housekeeping ------------------------------------------------------------------------

    async def stream_trim(self, p: StreamTrimParams) -> int:
        trimmed = 0
        with translate("stream_trim"):
            for stream in self.keys.streams(p.queue):
                trimmed += _int(await self._scripts.trim(keys=[stream], args=[GROUP]))
        return trimmed

    async def queue_stats(self, p: QueueStatsParams) -> QueueStats:
        with translate("queue_stats"):
            due, ready, pending = await self._scripts.stats(
                keys=[self.keys.due(p.queue), *self.keys.streams(p.queue)], args=[GROUP])
        return QueueStats(due=_int(due), ready=_int(ready), pending=_int(pending))

    async def epoch_check(self) -> bool:
        """The epoch key holds a random value set once (SET NX). Gone, or not the value this
        instance saw last, means Redis lost its data (a flush, or a restart without
        persistence). A first start on an empty Redis reports a loss too: reconciling then is
        what a fresh process should do anyway."""
        candidate = secrets.token_hex(16)
        with translate("epoch_check"):
            previous = await self.client.set(self.keys.epoch, candidate, nx=True, get=True)
        current = candidate if previous is None else str(previous)
        intact = previous is not None and self._epoch in (None, current)
        self._epoch = current
        return intact

    async def health(self) -> RedisHealth:
        problems: list[str] = []
        policy: str | None = None
        try:
            with translate("ping"):
                await ping(self.client)
        except ConnectionError as exc:
            return RedisHealth(ok=False, problems=(str(exc),))
        try:
            with translate("config_get"):
                policies = await maxmemory_policies(self.client)
        except Exception as exc:  # managed Redis often disables CONFIG; not fatal
            problems.append(f"cannot read maxmemory-policy ({exc})")
            policies = {}
        bad = {node: p for node, p in policies.items() if p is not None and p != "noeviction"}
        policy = next(iter(bad.values()), next(iter(policies.values()), None))
        for node, p in bad.items():
            problems.append(f"maxmemory-policy is {p!r}{f' on {node}' if node else ''}: Redis "
                            "may evict due keys and stream entries under memory pressure; "
                            "use noeviction")
        return RedisHealth(ok=True, problems=tuple(problems), maxmemory_policy=policy)

    async def check_settings(self) -> RedisHealth:
        """Log loudly what is wrong with the server's settings; returns the health."""
        health = await self.health()
        for problem in health.problems:
            log.warning("REDIS SETTINGS: %s", problem)
        return health


def _stream_replies(reply: object) -> Iterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    """XREADGROUP replies as (stream, entries), whether RESP2 (a list) or RESP3 (a dict)."""
    if isinstance(reply, dict):
        yield from ((str(k), v) for k, v in reply.items())
    elif isinstance(reply, list):
        for stream, items in reply:
            yield str(stream), items
