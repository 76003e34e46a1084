"""``tickwork scheduler``, ``tickwork worker`` and ``tickwork run`` as child processes.

Each runs in a session of its own (so a kill reaches the process group and nothing else), with
its log read all the time (so it never blocks on a full pipe); ``wait_for`` returns the next log
line that matches a pattern. Every new line of any process sets a shared event, which is what
the harness waits on between looks at the ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

TICKWORK = (sys.executable, "-m", "tickwork.cli.main")
READY = r"tickwork (scheduler |worker )?is running"
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def base_env(database: str, **extra: str) -> dict[str, str]:
    """The parent's environment without its TICKWORK_* settings, plus what every child needs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env.update({
        "TICKWORK_DATABASE_URL": database,
        "TICKWORK_PYTHON_ALLOWED_MODULES": "tickwork.testing",
        "TICKWORK_OUTBOUND_ALLOW": "127.0.0.1",
        "TICKWORK_LOG_EACH_RUN": "true",  # ``FaultRun.settle`` looks again after each log line
        "PYTHONUNBUFFERED": "1",
        **extra,
    })
    return env


def faketime_env(offset: str) -> dict[str, str]:
    """LD_PRELOAD libfaketime with the wall clock moved by ``offset`` ("+30s"); the monotonic
    clock stays real, so the ledger still records true instants."""
    return {"LD_PRELOAD": str(FAKETIME_LIB), "FAKETIME": offset,
            "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_NO_CACHE": "1"}


class Proc:
    """One tickwork process. ``args`` start with the subcommand: ``worker --queues ...``."""

    def __init__(self, name: str, env: Mapping[str, str], *args: str,
                 lines_event: asyncio.Event | None = None) -> None:
        self.name = name
        self.env = dict(env)
        self.args = args
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []
        self.stamps: list[float] = []  # when each line arrived (epoch seconds)
        self.exited_at: float | None = None
        self.signalled = False  # the harness killed or stopped it (not a death of its own)
        self._used: set[int] = set()
        self._new = asyncio.Event()
        self._shared = lines_event
        self._reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.exited_at is None

    async def start(self, within: float = 30.0) -> Proc:
        self.proc = await asyncio.create_subprocess_exec(
            *TICKWORK, *self.args, env=self.env, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
        self._reader = asyncio.create_task(self._read(), name=f"log-{self.name}")
        await self.wait_for(READY, within)
        return self

    async def _read(self) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        while raw := await self.proc.stderr.readline():
            self.stamps.append(time.time())
            self.lines.append(raw.decode(errors="replace").rstrip())
            self._notify()
        await self.proc.wait()
        self.exited_at = time.time()
        self._notify()

    def _notify(self) -> None:
        self._new.set()
        if self._shared is not None:
            self._shared.set()

    async def wait_for(self, pattern: str, within: float = 30.0) -> re.Match[str]:
        """The first log line not matched before that matches ``pattern``."""
        regex = re.compile(pattern)

        async def find() -> re.Match[str]:
            while True:
                self._new.clear()
                for i, line in enumerate(self.lines):
                    if i not in self._used and (m := regex.search(line)):
                        self._used.add(i)
                        return m
                if self.exited_at is not None:
                    raise AssertionError(f"{self.name} exited before {pattern!r}; log:\n"
                                         + self.tail())
                await self._new.wait()

        try:
            return await asyncio.wait_for(find(), within)
        except TimeoutError:
            raise AssertionError(f"{self.name}: no {pattern!r} within {within}s; log:\n"
                                 + self.tail()) from None

    def seen_at(self, pattern: str, after: float = 0.0) -> float | None:
        """When the first line matching ``pattern`` arrived after ``after`` (epoch seconds;
        the log's own timestamps are whole seconds), or None."""
        regex = re.compile(pattern)
        return next((at for at, line in zip(self.stamps, self.lines, strict=False)
                     if at >= after and regex.search(line)), None)

    async def wait_exit(self, within: float = 30.0) -> int:
        assert self.proc is not None
        try:
            code = await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError:
            raise AssertionError(f"{self.name} (pid {self.proc.pid}) still running {within}s "
                                 f"later; log:\n{self.tail()}") from None
        if self._reader is not None:
            await asyncio.wait_for(self._reader, within)
        return code

    def tail(self, n: int = 30) -> str:
        return "\n".join(f"  [{self.name}] {line}" for line in self.lines[-n:])

    def signal(self, sig: signal.Signals, *, group: bool = True) -> float:
        """Send ``sig`` (to the whole process group by default); the instant it was sent."""
        assert self.proc is not None
        self.signalled = True
        at = time.time()
        if group:
            os.killpg(self.proc.pid, sig)
        else:
            self.proc.send_signal(sig)
        return at

    async def close(self) -> None:
        """Kill it if it still runs (its group only), and reap it."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
