"""A private ``nats-server`` with JetStream per test, for tests that kill and restart the broker.

The shared NATS server serves other tests and is never restarted; a test that needs to do
that starts its own on a free port, loopback only, with JetStream storing its streams in the
test's directory (so a restart keeps what the server acknowledged), and kills it at the end.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from tickwork.testing.faults.redisserver import free_port

READY = b"Server is ready"


class PrivateNats:
    def __init__(self, store: Path, port: int | None = None) -> None:
        self.store = store
        self.port = port or free_port()
        self.proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    async def start(self) -> PrivateNats:
        binary = shutil.which("nats-server")
        if binary is None:
            pytest.skip("nats-server is not installed")
        self.proc = await asyncio.create_subprocess_exec(
            binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(self.store),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True)
        assert self.proc.stdout is not None
        while READY not in (line := await asyncio.wait_for(self.proc.stdout.readline(), 10)):
            assert line, "nats-server exited at start"
        self._drain = asyncio.create_task(self._read_rest(self.proc))
        return self

    @staticmethod
    async def _read_rest(proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while await proc.stdout.readline():  # never let a full pipe block the server
            pass

    async def kill(self) -> float:
        """SIGKILL; returns when it happened. Its stored streams stay on disk."""
        at = time.time()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        if self._drain is not None:
            await asyncio.gather(self._drain, return_exceptions=True)
        return at
