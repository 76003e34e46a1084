"""The Dispatch conformance suite against a Redis Cluster and a Sentinel-managed master.

Both are private deployments started once for this module (``tickwork.testing.
redis_deployments``): 3 masters with a replica each, and a master, a replica and 3 sentinels.
Each test has a key prefix of its own, as on a single server; the cluster's tests also check
that every script and multi-key command stays in one slot and that pipelines span nodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from tickwork.drivers.dispatch import (
    DueAddParams,
    DueCountParams,
    DueItem,
    DuePromoteParams,
    EntryAckParams,
    EntryReadParams,
)
from tickwork.drivers.redis import RedisDispatch
from tickwork.drivers.redis.connect import open_client
from tickwork.testing import redis as rt
from tickwork.testing.conformance.dispatch import DispatchConformance, now_ms
from tickwork.testing.faults.rediscluster import PrivateCluster
from tickwork.testing.faults.redissentinel import PrivateSentinel

LoseData = Callable[[], Awaitable[None]]


async def _peer(url: str, prefix: str) -> RedisDispatch:
    """As a process connects: its first command (check_settings) comes before any other."""
    d = RedisDispatch(open_client(url, socket_connect_timeout=2), prefix=prefix,
                      owns_client=True)
    await d.check_settings()
    return d


class TestRedisClusterDispatch(DispatchConformance):
    @pytest.fixture
    async def dispatch(self, redis_cluster: PrivateCluster,
                       redis_prefix: str) -> AsyncIterator[RedisDispatch]:
        async with rt.prefixed_dispatch(redis_cluster.url, redis_prefix) as d:
            assert isinstance(d.client, RedisCluster)
            yield d

    @pytest.fixture
    async def peer_dispatch(self, redis_cluster: PrivateCluster,
                            redis_prefix: str) -> AsyncIterator[RedisDispatch]:
        d = await _peer(redis_cluster.url, redis_prefix)
        yield d
        await d.close()

    @pytest.fixture(name="make_idle")
    def make_idle_fixture(self) -> object:
        return rt.make_idle

    @pytest.fixture
    async def volatile_dispatch(self, redis_cluster: PrivateCluster
                                ) -> AsyncIterator[tuple[RedisDispatch, LoseData]]:
        """The cluster is this module's own: FLUSHALL on every master stands for a loss."""
        async with rt.prefixed_dispatch(redis_cluster.url) as d:

            async def lose() -> None:
                await d.client.flushall()

            yield d, lose

    @pytest.fixture
    async def unreachable_dispatch(self) -> AsyncIterator[RedisDispatch]:
        d = RedisDispatch.from_url("redis+cluster://127.0.0.1:1/", prefix=rt.new_prefix())
        yield d
        await d.close()


class TestRedisSentinelDispatch(DispatchConformance):
    @pytest.fixture
    async def dispatch(self, redis_sentinel: PrivateSentinel,
                       redis_prefix: str) -> AsyncIterator[RedisDispatch]:
        async with rt.prefixed_dispatch(redis_sentinel.url, redis_prefix) as d:
            yield d

    @pytest.fixture
    async def peer_dispatch(self, redis_sentinel: PrivateSentinel,
                            redis_prefix: str) -> AsyncIterator[RedisDispatch]:
        d = await _peer(redis_sentinel.url, redis_prefix)
        yield d
        await d.close()

    @pytest.fixture(name="make_idle")
    def make_idle_fixture(self) -> object:
        return rt.make_idle

    @pytest.fixture
    async def volatile_dispatch(self, redis_sentinel: PrivateSentinel
                                ) -> AsyncIterator[tuple[RedisDispatch, LoseData]]:
        async with rt.prefixed_dispatch(redis_sentinel.url) as d:

            async def lose() -> None:
                await d.client.flushall()

            yield d, lose

    @pytest.fixture
    async def unreachable_dispatch(self) -> AsyncIterator[RedisDispatch]:
        d = RedisDispatch.from_url("redis+sentinel://127.0.0.1:1/tickwork/0",
                                   prefix=rt.new_prefix())
        yield d
        await d.close()


# -- what only a cluster can get wrong -----------------------------------------------------

QUEUES = [f"q{i}" for i in range(12)]


@pytest.fixture
async def cluster_dispatch(redis_cluster: PrivateCluster) -> AsyncIterator[RedisDispatch]:
    async with rt.prefixed_dispatch(redis_cluster.url) as d:
        yield d


async def test_queues_spread_over_the_masters_and_each_stays_in_one_slot(
        redis_cluster: PrivateCluster, cluster_dispatch: RedisDispatch) -> None:
    d = cluster_dispatch
    masters = {(await redis_cluster.master_of(d.keys.due(q))).port for q in QUEUES}
    assert len(masters) > 1, "the test's queues land on more than one master"
    for q in QUEUES:
        keys = [d.keys.due(q), d.keys.dead(q), *d.keys.streams(q)]
        assert len({key_slot(k.encode()) for k in keys}) == 1, q


async def test_pipelines_and_scripts_span_the_nodes(cluster_dispatch: RedisDispatch) -> None:
    """One due_add pipeline over queues on every master, then each queue's scripts (promote,
    read) and its ack pipeline: nothing is refused with CROSSSLOT or MOVED."""
    d = cluster_dispatch
    now = await now_ms(d)
    items = [DueItem(q, f"{q}:k{i}", now - 1, priority=p)
             for q in QUEUES for i, p in enumerate((10, 0, -5))]
    assert await d.due_add(DueAddParams(items)) == len(items)
    for q in QUEUES:
        assert await d.due_count(DueCountParams(q)) == 3
        assert (await d.due_promote(DuePromoteParams(q))).moved == 3
        got = await d.entry_read(EntryReadParams(q, "c1", 10, block_ms=0))
        assert [e.key for e in got.entries] == [f"{q}:k0", f"{q}:k1", f"{q}:k2"]
        assert await d.entry_ack(EntryAckParams(q, got.entries)) == 3


async def test_a_blocking_read_wakes_on_another_node(cluster_dispatch: RedisDispatch,
                                                      redis_cluster: PrivateCluster) -> None:
    """Workers block on several queues at once, each on its own master's connection."""
    d = cluster_dispatch
    for q in QUEUES[:4]:
        await d.entry_read(EntryReadParams(q, "c1", 1, block_ms=0))  # makes the groups
    reads = [asyncio.create_task(d.entry_read(EntryReadParams(q, "c1", 1, block_ms=5000)))
             for q in QUEUES[:4]]
    now = await now_ms(d)
    await d.due_add(DueAddParams([DueItem(q, f"{q}:late", now - 1) for q in QUEUES[:4]]))
    for q in QUEUES[:4]:
        await d.due_promote(DuePromoteParams(q))
    got = await asyncio.wait_for(asyncio.gather(*reads), 10)
    assert [[e.key for e in r.entries] for r in got] == [[f"{q}:late"] for q in QUEUES[:4]]


async def test_health_on_a_cluster(cluster_dispatch: RedisDispatch) -> None:
    health = await cluster_dispatch.health()
    assert health.ok, health.problems
    assert health.maxmemory_policy == "noeviction"


async def test_health_names_a_node_that_may_evict(
        redis_cluster: PrivateCluster, cluster_dispatch: RedisDispatch) -> None:
    """Every master is asked, not only the one a command happens to reach."""
    d = cluster_dispatch
    masters = {(await redis_cluster.master_of(d.keys.due(q))).port for q in QUEUES}
    port = max(masters)
    node = Redis(port=port, decode_responses=True)
    try:
        await node.config_set("maxmemory-policy", "allkeys-lru")
        health = await d.health()
    finally:
        await node.config_set("maxmemory-policy", "noeviction")
        await node.aclose()
    assert health.ok
    assert health.maxmemory_policy == "allkeys-lru"
    assert [p for p in health.problems if "allkeys-lru" in p] == [
        f"maxmemory-policy is 'allkeys-lru' on 127.0.0.1:{port}: Redis may evict due keys "
        "and stream entries under memory pressure; use noeviction"]
