"""A private ``redis-server`` per test, for tests that flush, restart, stop or cut off Redis.

A shared Redis serves other tests at the same time and is never flushed, restarted or stopped;
a test that needs to do that starts its own server on a free port (no persistence, loopback
only, ``maxmemory-policy noeviction`` as docs/redis.md asks), owns its process, and kills it at
the end. Each fault method returns the instant it took effect, for the fault's record.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def need_binaries() -> None:
    """Skip without redis-server and redis-cli; fail instead under CI=true (.ci/run installs
    them)."""
    missing = [b for b in ("redis-server", "redis-cli") if shutil.which(b) is None]
    if not missing:
        return
    message = f"{' and '.join(missing)} not installed: no private Redis Cluster or Sentinel"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}. CI=true: a missing service is a failure here.")
    pytest.skip(message)


class PrivateRedis:
    """``args``: more ``redis-server`` arguments (a cluster node's, a replica's); with
    ``sentinel``, a sentinel reading the config file ``args[0]``. ``persist``: a directory for
    an append-only file synced on every write, so what the server acknowledged survives a
    kill and restart (a broker, not a dispatch)."""

    def __init__(self, port: int | None = None, args: tuple[str, ...] = (),
                 *, sentinel: bool = False, persist: Path | None = None) -> None:
        self.port = port or free_port()
        self.args = args
        self.sentinel = sentinel
        self.persist = persist
        self.proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> PrivateRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        durable = ["--appendonly", "no"] if self.persist is None else [
            "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.persist)]
        argv = ([*self.args[:1], "--sentinel", "--port", str(self.port), *self.args[1:]]
                if self.sentinel else
                ["--port", str(self.port), "--save", "", *durable,
                 "--bind", "127.0.0.1", "--maxmemory-policy", "noeviction", *self.args])
        self.proc = await asyncio.create_subprocess_exec(
            binary, *argv,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True)
        assert self.proc.stdout is not None
        ready = b"Sentinel ID is" if self.sentinel else b"Ready to accept connections"
        while ready not in (line := await asyncio.wait_for(
                self.proc.stdout.readline(), 10)):
            assert line, "redis-server exited at start"
        self._drain = asyncio.create_task(self._read_rest(self.proc))
        return self

    @staticmethod
    async def _read_rest(proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while await proc.stdout.readline():  # never let a full pipe block the server
            pass

    def pause(self) -> float:
        """SIGSTOP: hung (commands wait until the client's socket timeout), data kept."""
        assert self.proc is not None
        at = time.time()
        os.kill(self.proc.pid, signal.SIGSTOP)
        return at

    def resume(self) -> float:
        assert self.proc is not None
        at = time.time()
        os.kill(self.proc.pid, signal.SIGCONT)
        return at

    async def flushall(self) -> float:
        """FLUSHALL: every key gone, connections kept."""
        from redis.asyncio import Redis  # noqa: PLC0415  (the redis extra, only when used)

        client = Redis.from_url(self.url)
        try:
            at = time.time()
            await client.flushall()
        finally:
            await client.aclose()
        return at

    async def kill(self) -> float:
        at = time.time()
        if self.proc is not None and self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            await self.proc.wait()
        if self._drain is not None:
            await asyncio.gather(self._drain, return_exceptions=True)
        return at

    async def restart(self) -> float:
        """A restart without persistence: everything in it is gone. Returns when it was
        killed; it accepts connections again when this returns."""
        at = await self.kill()
        await self.start()
        return at


@pytest.fixture
async def private_redis() -> AsyncIterator[PrivateRedis]:
    """A redis-server of the test's own, which it may flush, restart or stop; killed after.
    Test modules take it as ``private_redis = redisserver.private_redis`` (any name)."""
    server = await PrivateRedis().start()
    try:
        yield server
    finally:
        await server.kill()
