"""The Dispatch conformance suite against Redis, plus what only the Redis driver has."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from importlib.resources import files
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot
from redis.exceptions import ResponseError

from tickwork.drivers.dispatch import (
    DueAddParams,
    DueCountParams,
    DueItem,
    DuePromoteParams,
    Entry,
    EntryReadParams,
    QueueStatsParams,
)
from tickwork.drivers.redis import Keyspace, RedisDispatch
from tickwork.drivers.redis.errors import translate
from tickwork.drivers.redis.keys import GROUP
from tickwork.errors import DispatchError, DispatchUnavailable
from tickwork.testing import redis as rt
from tickwork.testing.conformance.dispatch import DispatchConformance, add, now_ms, read


async def make_idle(dispatch: RedisDispatch, queue: str, consumer: str,
                    entries: Sequence[Entry], idle_ms: int) -> None:
    """XCLAIM to the same consumer with IDLE: sets the idle time, no waiting, no delivery."""
    for e in entries:
        await dispatch.client.xclaim(dispatch.keys.stream(queue, e.band), GROUP, consumer, 0,
                                     [e.id], idle=idle_ms, justid=True)


class TestRedisDispatch(DispatchConformance):
    @pytest.fixture
    def dispatch(self, redis_dispatch: RedisDispatch) -> RedisDispatch:
        return redis_dispatch

    @pytest.fixture
    def peer_dispatch(self, redis_peer_dispatch: RedisDispatch) -> RedisDispatch:
        return redis_peer_dispatch

    @pytest.fixture(name="make_idle")
    def make_idle_fixture(self) -> object:
        return make_idle


# -- the keyspace --------------------------------------------------------------------------


def test_keys_of_a_queue_share_one_cluster_slot() -> None:
    ks = Keyspace("tw")
    keys = [ks.due("mail"), ks.dead("mail"), *ks.streams("mail")]
    assert keys[0] == "{tw:mail}:due"
    assert ks.streams("mail") == tuple(f"{{tw:mail}}:s:{b}" for b in range(4))
    assert len({key_slot(k.encode()) for k in keys}) == 1
    assert key_slot(ks.due("default").encode()) != key_slot(ks.due("mail").encode())
    assert ks.epoch == "tw:epoch"


def test_keyspace_refuses_braces_and_bad_bands() -> None:
    with pytest.raises(ValueError, match="hash tag"):
        Keyspace("tw").due("a}b")
    with pytest.raises(ValueError, match="hash tag"):
        Keyspace("{tw}")
    with pytest.raises(ValueError, match="decreasing"):
        Keyspace("tw", (0, 5))


def test_priority_bands() -> None:
    ks = Keyspace()
    assert [ks.band_of(p) for p in (100, 10, 9, 1, 0, -1, -100)] == [0, 0, 1, 1, 2, 3, 3]
    assert Keyspace(band_floors=()).bands == 1


def test_every_script_states_its_contract() -> None:
    scripts = [f for f in (files("tickwork.drivers.redis") / "scripts").iterdir()
               if f.name.endswith(".lua")]
    assert len(scripts) == 7
    for script in scripts:
        head = script.read_text("utf-8").split("\n\n")[0]
        assert head.startswith(f"-- {script.name}:"), script.name
        assert "KEYS[1" in head, script.name


# -- Redis-only behaviour ------------------------------------------------------------------


async def test_a_malformed_member_goes_to_the_lowest_band(redis_dispatch: RedisDispatch) -> None:
    d = redis_dispatch
    now = await now_ms(d)
    await d.client.zadd(d.keys.due("default"), {"no-band": now - 1, "99|far": now - 1})
    assert (await d.due_promote(DuePromoteParams("default"))).moved == 2
    got = await read(d)
    assert sorted((e.key, e.band) for e in got) == [("far", 3), ("no-band", 3)]


async def test_entries_of_any_field_layout_are_read(redis_dispatch: RedisDispatch) -> None:
    """The feed's layout (k, then d) is read in place; an entry written otherwise (fields in
    another order, one more field, a due time that is not a number) is read field by field."""
    d = redis_dispatch
    await read(d)  # makes the groups
    stream = d.keys.stream("default", 1)
    await d.client.xadd(stream, {"k": "fed", "d": "1700000000123"})
    await d.client.xadd(stream, {"d": "1700000000456", "k": "swapped"})
    await d.client.xadd(stream, {"k": "more", "d": "7", "x": "y"})
    await d.client.xadd(stream, {"k": "odd", "d": "soon"})
    got = await read(d)
    assert [(e.key, e.due_ms, e.band, e.delivery_count) for e in got] == [
        ("fed", 1700000000123, 1, 1), ("swapped", 1700000000456, 1, 1), ("more", 7, 1, 1),
        ("odd", 0, 1, 1)]
    assert all(e.id and e.id[0].isdigit() for e in got)


async def test_reads_rotate_so_low_bands_are_not_starved(redis_prefix: str) -> None:
    async with rt.prefixed_dispatch(prefix=redis_prefix, fair_every=3) as d:
        now = await now_ms(d)
        await add(d, *([now - 1] * 5), prefix="hi", priority=10)
        await add(d, *([now - 1] * 5), prefix="lo", priority=-1)
        await d.due_promote(DuePromoteParams("default"))
        bands = [e.band for _ in range(6) for e in await read(d, 1)]
        assert bands == [0, 0, 3, 0, 0, 3]  # every 3rd read starts at a lower band


async def test_a_blocking_read_gives_back_what_it_cannot_take(
        redis_dispatch: RedisDispatch) -> None:
    """Entries that arrive between the prioritised read and the blocking one come one per band;
    beyond the count asked for, they go back to the due set in one atomic move each."""
    d = redis_dispatch
    now = await now_ms(d)
    for priority in (10, 5, 0):
        await add(d, now - 1, prefix=f"p{priority}-", priority=priority)
    await read(d)  # makes the groups
    await d.due_promote(DuePromoteParams("default"))
    woke = await d._read_blocking("default", "c1", 100)
    assert [e.band for e in woke] == [0, 1, 2]
    kept = await d._give_back("default", woke, 1)
    assert [e.key for e in kept] == ["p10-0"]
    stats = await d.queue_stats(QueueStatsParams("default"))
    assert (stats.due, stats.pending) == (2, 1)


async def test_other_redis_errors_are_dispatch_errors(redis_dispatch: RedisDispatch) -> None:
    d = redis_dispatch
    await d.client.set(d.keys.due("default"), "not a zset")
    with pytest.raises(DispatchError) as caught:
        await d.due_count(DueCountParams("default"))
    assert not isinstance(caught.value, DispatchUnavailable)
    with pytest.raises(DispatchError, match="WRONGTYPE"):
        await d.due_add(DueAddParams([DueItem("default", "k", 1)]))


def test_out_of_memory_and_loading_mean_unavailable() -> None:
    for reply in ("OOM command not allowed when used memory > 'maxmemory'.",
                  "LOADING Redis is loading the dataset in memory"):
        with pytest.raises(DispatchUnavailable), translate("x"):
            raise ResponseError(reply)


async def test_a_client_must_decode_responses() -> None:
    client = Redis()
    with pytest.raises(ValueError, match="decode_responses"):
        RedisDispatch(client)
    await client.aclose()


async def test_health_and_settings(redis_dispatch: RedisDispatch,
                                   caplog: pytest.LogCaptureFixture,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    health = await redis_dispatch.health()
    assert health.ok
    assert health.maxmemory_policy is not None

    async def lru(*_: object) -> dict[str, str]:
        return {"maxmemory-policy": "allkeys-lru"}

    monkeypatch.setattr(redis_dispatch.client, "config_get", lru)
    with caplog.at_level(logging.WARNING, logger="tickwork.dispatch.redis"):
        health = await redis_dispatch.check_settings()
    assert health.ok
    assert health.maxmemory_policy == "allkeys-lru"
    assert "noeviction" in caplog.text


async def test_entry_read_validates_block(redis_dispatch: RedisDispatch) -> None:
    with pytest.raises(ValueError, match="block_ms"):
        await redis_dispatch.entry_read(EntryReadParams("default", "c", 1, block_ms=-1))


@pytest.fixture
async def raw_client() -> AsyncIterator[Redis]:
    client = await rt.connect()
    yield client
    await client.aclose()


async def test_test_prefix_cleanup_deletes_only_its_keys(raw_client: Redis) -> None:
    prefix = rt.new_prefix()
    async with rt.prefixed_dispatch(prefix=prefix) as d:
        await add(d, 1)
        await d.epoch_check()
        assert await raw_client.exists(d.keys.due("default"), d.keys.epoch) == 2
    assert [k async for k in raw_client.scan_iter(match=f"*{prefix}*")] == []
    with pytest.raises(ValueError, match="not a test prefix"):
        await rt.delete_prefix(raw_client, "tickwork")


async def test_a_loss_between_the_two_reads_is_reported(
        redis_dispatch: RedisDispatch, monkeypatch: pytest.MonkeyPatch) -> None:
    """The streams vanish after the prioritised read and before the blocking one: the NOGROUP
    of the blocking read is caught, the groups are made again, and the caller is told."""
    d = redis_dispatch
    await read(d)  # the groups exist
    original = d._read_now

    async def then_lose(*args: Any) -> tuple[list[Entry], int]:
        monkeypatch.setattr(d, "_read_now", original)
        result = await original(*args)
        await d.client.delete(*d.keys.streams("default"))
        return result

    monkeypatch.setattr(d, "_read_now", then_lose)
    got = await d.entry_read(EntryReadParams("default", "c1", 5, block_ms=10_000))
    assert got.entries == []
    assert got.groups_created == d.keys.bands
