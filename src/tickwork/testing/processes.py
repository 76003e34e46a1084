"""Real tickwork processes for tests: start, watch their log lines, kill them."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

TICKWORK = [sys.executable, "-m", "tickwork.cli.main"]


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env.update({
        "TICKWORK_DATABASE_URL": f"sqlite:///{tmp}/tickwork.db",
        "TICKWORK_PYTHON_ALLOWED_MODULES": "tickwork.testing",
        "PYTHONUNBUFFERED": "1",
        "TICKWORK_LOG_EACH_RUN": "true",  # tests wait for a run's own log line
        **extra,
    })
    return env


async def cli(env: dict[str, str], *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *TICKWORK, *args, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def cli_json(env: dict[str, str], *args: str) -> Any:
    code, out, err = await cli(env, *args, "--json")
    assert code == 0, err
    return json.loads(out)


class Service:
    """``tickwork run`` in a child process; ``wait_for`` reads its log until a line matches."""

    def __init__(self, env: dict[str, str], *args: str, command: tuple[str, ...] = (),
                 cwd: Path | None = None) -> None:
        self.env = env
        self.args = args
        self.command = command or tuple(TICKWORK)
        self.cwd = cwd
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []

    async def start(self) -> Service:
        self.proc = await asyncio.create_subprocess_exec(
            *self.command, "run", *self.args, env=self.env, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, cwd=self.cwd)
        await self.wait_for(r"tickwork is running")
        return self

    async def wait_for(self, pattern: str,
                       timeout: float = 30.0) -> re.Match[str]:  # noqa: ASYNC109  (a bound)
        """The first line from now on (or already read) that matches ``pattern``."""
        regex = re.compile(pattern)
        for line in self.lines:
            if m := regex.search(line):
                self.lines.remove(line)
                return m
        assert self.proc is not None
        assert self.proc.stderr is not None

        async def read() -> re.Match[str]:
            assert self.proc is not None
            assert self.proc.stderr is not None
            while True:
                raw = await self.proc.stderr.readline()
                if not raw:
                    raise AssertionError(f"service exited before {pattern!r}; log:\n"
                                         + "\n".join(self.lines[-30:]))
                line = raw.decode().rstrip()
                if m := regex.search(line):
                    return m
                self.lines.append(line)

        return await asyncio.wait_for(read(), timeout)

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)

    def terminate(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    async def exit_code(self, timeout: float = 30.0) -> int:  # noqa: ASYNC109  (a bound)
        assert self.proc is not None
        assert self.proc.stderr is not None
        rest = await asyncio.wait_for(self.proc.stderr.read(), timeout)
        self.lines.extend(rest.decode().splitlines())
        return await asyncio.wait_for(self.proc.wait(), timeout)

    async def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.kill9()
            await self.proc.wait()
