"""The fault suite's Redis faults on each deployment: one server, a Redis Cluster, Sentinel.

The Redis fault cases (tests/faults/test_faults_redis.py) run one body on every deployment;
what a fault does to "Redis" is what differs, and lives here:

- ``flushall``: FLUSHALL on the server / on every master of the cluster / on the sentinels'
  master (replicas follow their master).
- ``restart``: without persistence, so everything is gone: the server / every master of the
  cluster at once (back within a second, with their cluster config: no replica is elected, as
  the masters that would vote are the ones restarting, and each replica resyncs from its empty
  master) / the sentinels' master (back well within the sentinels' 1 s ``down-after``, so they
  do not fail over; the replica resyncs empty).
- ``hang``: SIGSTOP of the node serving the queue: the server / the cluster master owning the
  queue's slot / the sentinels' master. A cluster (node timeout 1 s) and the sentinels (down
  after 1 s) replace a hung master within seconds; ``master()`` then names its replica, which
  a case reports.

``redis_topology`` is a fixture parametrized indirectly by name (``"server"`` without).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tickwork.drivers.redis.keys import Keyspace
from tickwork.testing.faults.rediscluster import PrivateCluster
from tickwork.testing.faults.redissentinel import PrivateSentinel
from tickwork.testing.faults.redisserver import PrivateRedis, need_binaries

QUEUE_KEY = Keyspace().due("default")  # the processes' default prefix and queue


class Deployment:
    """A private Redis deployment of one test, with the faults the cases inject."""

    name = ""

    @property
    def url(self) -> str:
        raise NotImplementedError

    async def start(self) -> Deployment:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def masters(self) -> list[PrivateRedis]:
        """Every node that holds data clients write to."""
        raise NotImplementedError

    async def master(self) -> PrivateRedis:
        """The node serving the default queue now."""
        raise NotImplementedError

    async def healthy(self) -> None:
        """Wait until the deployment serves again after a restart."""

    async def flushall(self) -> float:
        """FLUSHALL on every master; returns when the first began."""
        return min(await asyncio.gather(*(n.flushall() for n in await self.masters())))

    async def restart(self) -> float:
        """Every master restarted empty; returns when the first was killed, once it serves."""
        at = min(await asyncio.gather(*(n.restart() for n in await self.masters())))
        await self.healthy()
        return at

    async def hang(self) -> tuple[PrivateRedis, float]:
        """SIGSTOP of the node serving the queue; returns it (``resume()`` it) and when."""
        node = await self.master()
        return node, node.pause()


class OneServer(Deployment):
    name = "server"

    def __init__(self) -> None:
        self.server = PrivateRedis()

    @property
    def url(self) -> str:
        return self.server.url

    async def start(self) -> OneServer:
        await self.server.start()
        return self

    async def stop(self) -> None:
        await self.server.kill()

    async def masters(self) -> list[PrivateRedis]:
        return [self.server]

    async def master(self) -> PrivateRedis:
        return self.server


class Cluster(Deployment):
    name = "cluster"

    def __init__(self) -> None:
        need_binaries()
        self.cluster = PrivateCluster()

    @property
    def url(self) -> str:
        return self.cluster.url

    async def start(self) -> Cluster:
        await self.cluster.start()
        return self

    async def stop(self) -> None:
        await self.cluster.stop()

    async def masters(self) -> list[PrivateRedis]:
        return await self.cluster.serving_masters()

    async def master(self) -> PrivateRedis:
        return await self.cluster.master_of(QUEUE_KEY)

    async def healthy(self) -> None:
        await self.cluster.wait_healthy(within=30)


class Sentinel(Deployment):
    name = "sentinel"

    def __init__(self) -> None:
        need_binaries()
        self.sentinel = PrivateSentinel()

    @property
    def url(self) -> str:
        return self.sentinel.url

    async def start(self) -> Sentinel:
        await self.sentinel.start()
        return self

    async def stop(self) -> None:
        await self.sentinel.stop()

    async def masters(self) -> list[PrivateRedis]:
        return [await self.master()]

    async def master(self) -> PrivateRedis:
        port = await self.sentinel.master_port()
        return next(n for n in self.sentinel.data_nodes if n.port == port)


KINDS: dict[str, type[Deployment]] = {d.name: d for d in (OneServer, Cluster, Sentinel)}


@pytest.fixture
async def redis_topology(request: pytest.FixtureRequest) -> AsyncIterator[Deployment]:
    """A private deployment: ``OneServer`` unless parametrized indirectly with
    ``"cluster"`` or ``"sentinel"``. Test modules take it as
    ``target = redistopology.redis_topology`` (any name)."""
    deployment = KINDS[getattr(request, "param", "server")]()
    try:
        yield await deployment.start()
    finally:
        await deployment.stop()
