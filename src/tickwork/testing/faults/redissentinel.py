"""A private Sentinel deployment per test: a master, its replica and 3 sentinels, own ports.

All five are ``PrivateRedis`` processes (no persistence, loopback only); the sentinels watch
the master under the name ``MASTER`` with a quorum of 2 and call it down after 1 s, so a
``kill -9`` of the master has the replica promoted within a few seconds. The shared Redis on
6379 is never touched.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from tickwork.testing.faults.redisserver import PrivateRedis, free_port, need_binaries

MASTER = "tickwork"
DOWN_AFTER_MS = 1000


def _client(port: int) -> Redis:
    return Redis(port=port, decode_responses=True, socket_connect_timeout=1, socket_timeout=2)


async def _role(port: int) -> dict[str, object]:
    client = _client(port)
    try:
        return dict(await client.info("replication"))
    finally:
        await client.aclose()


class PrivateSentinel:
    def __init__(self, sentinels: int = 3) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="tw-sentinel-")
        self.master = PrivateRedis(args=("--dir", self._dir.name))
        self.replica = PrivateRedis(args=("--dir", self._dir.name, "--replicaof", "127.0.0.1",
                                          str(self.master.port)))
        self.sentinels = [PrivateRedis(port, (self._conf(port),), sentinel=True)
                          for port in (free_port() for _ in range(sentinels))]

    def _conf(self, port: int) -> str:
        path = Path(self._dir.name) / f"sentinel-{port}.conf"
        path.write_text(
            f"bind 127.0.0.1\ndir {self._dir.name}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {self.master.port} 2\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} 5000\n"
            f"sentinel parallel-syncs {MASTER} 1\n", "utf-8")
        return str(path)

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    @property
    def data_nodes(self) -> list[PrivateRedis]:
        return [self.master, self.replica]

    async def start(self) -> PrivateSentinel:
        await self.master.start()
        await self.replica.start()
        await asyncio.gather(*(s.start() for s in self.sentinels))
        await self._wait(self._ready, within=30, what="the sentinels to see replica and peers")
        return self

    async def _wait(self, ready: Callable[[], Awaitable[str]], *, within: float, what: str) -> None:
        deadline, problem = time.monotonic() + within, "not asked yet"
        while time.monotonic() < deadline:
            try:
                problem = await ready()
            except (RedisError, OSError) as exc:
                problem = str(exc)
            if not problem:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"waited {within}s for {what}: {problem}")

    async def _ready(self) -> str:
        """Empty when the replica is in sync and every sentinel knows it and the others."""
        if (await _role(self.replica.port)).get("master_link_status") != "up":
            return "replica not in sync"
        for s in self.sentinels:
            client = _client(s.port)
            try:
                state = await client.sentinel_master(MASTER)
                assert isinstance(state, dict)
            finally:
                await client.aclose()
            if int(state.get("num-slaves", 0)) < 1 or int(
                    state.get("num-other-sentinels", 0)) < len(self.sentinels) - 1:
                return f"sentinel {s.port} does not know the replica or its peers yet"
        return ""

    async def master_port(self) -> int:
        """The master's port, as the first sentinel that answers names it."""
        for s in self.sentinels:
            if s.proc is None or s.proc.returncode is not None:
                continue
            client = _client(s.port)
            try:
                host_port = await client.sentinel_get_master_addr_by_name(MASTER)
            except (RedisError, OSError):
                continue
            finally:
                await client.aclose()
            if isinstance(host_port, tuple | list):
                return int(host_port[1])
        raise AssertionError("no sentinel answers")

    async def kill_master(self) -> tuple[PrivateRedis, float]:
        """``kill -9`` the current master; returns it and when it died."""
        port = await self.master_port()
        node = next(n for n in self.data_nodes if n.port == port)
        return node, await node.kill()

    async def wait_promoted(self, old: PrivateRedis, within: float = 30) -> float:
        """Wait until the sentinels name another master and it says it is one."""
        async def promoted() -> str:
            port = await self.master_port()
            if port == old.port:
                return f"the sentinels still name {port}"
            if (await _role(port)).get("role") != "master":
                return f"{port} is not a master yet"
            return ""

        await self._wait(promoted, within=within, what=f"a replica to replace {old.port}")
        return time.time()

    async def stop(self) -> None:
        await asyncio.gather(*(n.kill() for n in (*self.sentinels, *self.data_nodes)))
        self._dir.cleanup()


@pytest.fixture
async def private_sentinel() -> AsyncIterator[PrivateSentinel]:
    """A master, a replica and 3 sentinels of the test's own; it may kill the master."""
    need_binaries()
    deployment = PrivateSentinel()
    try:
        yield await deployment.start()
    finally:
        await deployment.stop()
