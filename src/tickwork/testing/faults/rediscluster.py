"""A private Redis Cluster per test: 3 masters, one replica each, on ports of its own.

Six ``redis-server --cluster-enabled yes`` processes (``PrivateRedis``, no persistence, loopback
only) joined by ``redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes``. Each node
needs its port and its cluster bus port (port + 10000) free, so ports are picked in a range
where both are. The node timeout is short (1 s), so killing a master with ``kill -9`` has its
replica promoted within a few seconds. The shared Redis on 6379 is never touched.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import socket
import tempfile
import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot
from redis.exceptions import RedisError

from tickwork.testing.faults.redisserver import PrivateRedis, need_binaries

BUS_OFFSET = 10_000
NODE_TIMEOUT_MS = 1000


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_ports(n: int, low: int = 20_000, high: int = 30_000) -> list[int]:
    """``n`` ports whose cluster bus ports are free too."""
    ports: list[int] = []
    while len(ports) < n:
        port = random.randrange(low, high)  # noqa: S311  (a port, not a secret)
        if port not in ports and _free(port) and _free(port + BUS_OFFSET):
            ports.append(port)
    return ports


async def _ask(port: int, *command: str) -> str:
    """A CLUSTER subcommand's reply text (redis-py parses no CLUSTER reply of a plain client)."""
    client = Redis(port=port, decode_responses=True, socket_connect_timeout=1, socket_timeout=2)
    try:
        return str(await client.execute_command(*command))  # type: ignore[no-untyped-call]
    finally:
        await client.aclose()


async def replica_in_sync(port: int) -> bool:
    client = Redis(port=port, decode_responses=True, socket_connect_timeout=1, socket_timeout=2)
    try:
        return (await client.info("replication")).get("master_link_status") == "up"
    finally:
        await client.aclose()


class PrivateCluster:
    def __init__(self, masters: int = 3, replicas: int = 1) -> None:
        self.masters, self.replicas = masters, replicas
        self._dir = tempfile.TemporaryDirectory(prefix="tw-cluster-")
        self.nodes = [PrivateRedis(port, (
            "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf",
            "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
            "--cluster-replica-validity-factor", "0", "--dir", self._dir.name))
            for port in cluster_ports(masters * (1 + replicas))]

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes) + "/"

    @property
    def alive(self) -> list[PrivateRedis]:
        return [n for n in self.nodes if n.proc is not None and n.proc.returncode is None]

    async def start(self) -> PrivateCluster:
        cli = shutil.which("redis-cli")
        if cli is None:
            pytest.skip("redis-cli is not installed")
        await asyncio.gather(*(n.start() for n in self.nodes))
        create = await asyncio.create_subprocess_exec(
            cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
            "--cluster-replicas", str(self.replicas), "--cluster-yes",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(create.communicate(), 60)
        assert create.returncode == 0, f"redis-cli --cluster create failed:\n{out.decode()}"
        await self.wait_healthy(within=30)
        return self

    async def topology(self, via: PrivateRedis | None = None) -> dict[str, dict[str, str]]:
        """CLUSTER NODES as {port: {"role": master|slave, "id", "master_id", "slots", ...}}."""
        node = via or self.alive[0]
        text = await _ask(node.port, "CLUSTER", "NODES")
        out = {}
        for line in text.splitlines():
            f = line.split()
            out[f[1].split("@")[0].rsplit(":", 1)[1]] = {
                "id": f[0], "role": "master" if "master" in f[2] else "slave",
                "failed": str("fail" in f[2] and "fail?" not in f[2]), "master_id": f[3],
                "slots": " ".join(f[8:])}
        return out

    async def wait_healthy(self, within: float) -> None:
        """Every live node says ``cluster_state:ok``, every live replica is in sync, and every
        slot is served by a live master."""
        deadline, problem = time.monotonic() + within, "not asked yet"
        while time.monotonic() < deadline:
            try:
                problem = await self._problem()
            except (RedisError, OSError) as exc:
                problem = str(exc)
            if not problem:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"the cluster is not healthy after {within}s: {problem}")

    async def _problem(self) -> str:
        alive = {str(n.port) for n in self.alive}
        for node in self.alive:
            info = await _ask(node.port, "CLUSTER", "INFO")
            if "cluster_state:ok" not in info:
                return f"{node.port}: cluster state not ok"
        topology = await self.topology()
        live_masters = [p for p, t in topology.items() if t["role"] == "master"
                        and t["slots"] and p in alive]
        if len(live_masters) != self.masters:
            return f"{len(live_masters)} live masters with slots"
        for node in self.alive:
            if topology[str(node.port)]["role"] == "slave" and not await replica_in_sync(
                    node.port):
                return f"replica {node.port} not in sync"
        return ""

    async def serving_masters(self) -> list[PrivateRedis]:
        """The live masters serving slots."""
        topology = await self.topology()
        return [n for n in self.alive if (t := topology.get(str(n.port))) is not None
                and t["role"] == "master" and t["slots"]]

    async def master_of(self, key: str) -> PrivateRedis:
        slot = key_slot(key.encode())
        for port, t in (await self.topology()).items():
            if t["role"] != "master" or not t["slots"]:
                continue
            for span in t["slots"].split():
                if span.startswith("["):  # a slot being migrated
                    continue
                low, _, high = span.partition("-")
                if int(low) <= slot <= int(high or low):
                    return next(n for n in self.nodes if n.port == int(port))
        raise AssertionError(f"no master serves slot {slot}")

    async def kill_master_of(self, key: str) -> tuple[PrivateRedis, float]:
        """``kill -9`` the master serving ``key``; returns it and when it died."""
        master = await self.master_of(key)
        return master, await master.kill()

    async def shard_of(self, key: str) -> list[PrivateRedis]:
        """The master serving ``key`` and its replicas."""
        master = await self.master_of(key)
        topology = await self.topology()
        master_id = topology[str(master.port)]["id"]
        replicas = [n for n in self.nodes if topology.get(str(n.port), {}).get(
            "master_id") == master_id]
        return [master, *replicas]

    async def kill_shard_of(self, key: str) -> tuple[list[PrivateRedis], float]:
        """``kill -9`` the master serving ``key`` and its replicas at once: its slots have no
        node left, and the cluster answers CLUSTERDOWN; returns them and when they died."""
        shard = await self.shard_of(key)
        at = time.time()
        await asyncio.gather(*(n.kill() for n in shard))
        return shard, at

    async def restart(self, nodes: list[PrivateRedis], within: float = 30) -> float:
        """Start killed nodes again, empty (no persistence) but with their cluster config
        (``nodes-<port>.conf``): they rejoin with their slots. Returns when the cluster was
        healthy again."""
        await asyncio.gather(*(n.start() for n in nodes))
        await self.wait_healthy(within)
        return time.time()

    async def wait_promoted(self, key: str, old: PrivateRedis, within: float = 30) -> float:
        """Wait until a live node other than ``old`` serves ``key`` and the cluster is ok;
        returns when that was seen."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                if (await self.master_of(key)) is not old and not await self._problem():
                    return time.time()
            except (RedisError, OSError, AssertionError):
                pass
            await asyncio.sleep(0.1)
        raise AssertionError(f"no replica took over from {old.port} within {within}s")

    async def stop(self) -> None:
        await asyncio.gather(*(n.kill() for n in self.nodes))
        self._dir.cleanup()


@pytest.fixture
async def private_cluster() -> AsyncIterator[PrivateCluster]:
    """A Redis Cluster of the test's own (3 masters, 3 replicas), which it may kill nodes of."""
    need_binaries()
    cluster = PrivateCluster()
    try:
        yield await cluster.start()
    finally:
        await cluster.stop()

