"""An in-process harness for tests: planner, rescuer and worker pool on one SQLite file, with
a FakeClock, real executors and real loops; ``harness`` is its pytest fixture."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.drivers.base import Completion
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.executors import build_executors
from tickwork.executors.base import ExecutorSettings
from tickwork.scheduler.planner import Planner
from tickwork.scheduler.rescuer import Rescuer
from tickwork.worker.pool import WorkerPool

START = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass
class Harness:
    """Planner, rescuer and worker pool on one SQLite file, driven by a FakeClock.

    Loops run for real; time moves only when the test says so. ``completed()`` waits (on an
    event, never a sleep) for the next completion the store has written.
    """

    store: SqliteStore
    clock: FakeClock
    client: AsyncClient
    planner: Planner
    rescuer: Rescuer
    pool: WorkerPool
    tmp: Path
    written: asyncio.Queue[tuple[Completion, bool]] = field(default_factory=asyncio.Queue)

    async def tick(self, seconds: float = 0.0) -> None:
        """Move time on, plan, and wake the workers (a worker that was between two looks when
        time moved would otherwise sleep its full poll interval on the FakeClock)."""
        if seconds:
            self.clock.advance(seconds)
        await self.planner.run_once(self.clock.now())
        self.pool.wake()

    async def completed(self, timeout: float = 10.0) -> Completion:  # noqa: ASYNC109  (a test's bound)
        completion, applied = await asyncio.wait_for(self.written.get(), timeout)
        assert applied, f"completion was fenced off: {completion}"
        return completion

    async def completed_n(self, n: int,
                          timeout: float = 10.0) -> list[Completion]:  # noqa: ASYNC109
        return [await self.completed(timeout) for _ in range(n)]


def make_executors(**overrides: Any) -> dict[str, Any]:
    # The tests' HTTP servers listen on 127.0.0.1, which the SSRF guard refuses by default.
    overrides = {"outbound_allow": ("127.0.0.1",), **overrides}
    settings = ExecutorSettings(python_allowed_modules=("tickwork.testing",), **overrides)
    return build_executors(settings)


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with make_harness(tmp_path) as h:
        yield h


class make_harness:  # a context manager that reads as a function at the call site
    def __init__(self, tmp_path: Path, *, queues: tuple[tuple[str, int], ...] = (("default", 8),),
                 clock: Any = None, **executor_overrides: Any) -> None:
        self.tmp_path = tmp_path
        self.clock = clock
        self.queues = queues
        self.executor_overrides = executor_overrides
        self.h: Harness | None = None

    async def __aenter__(self) -> Harness:
        store = SqliteStore(f"sqlite:///{self.tmp_path}/tickwork.db")
        await store.migrate()
        clock = self.clock or FakeClock(START)
        pool = WorkerPool(store=store, clock=clock, executors=make_executors(
            **self.executor_overrides), queues=self.queues, worker_id="w1",
            lease_seconds=30, heartbeat_seconds=10, poll_interval_seconds=1,
            shutdown_grace_seconds=5, rng=random.Random(7))  # noqa: S311  (repeatable jitter)
        planner = Planner(store=store, clock=clock, horizon_seconds=2, interval_seconds=1)
        rescuer = Rescuer(store=store, clock=clock)
        client = AsyncClient(store, clock=clock, on_change=pool.wake)
        h = Harness(store=store, clock=clock, client=client, planner=planner, rescuer=rescuer,
                    pool=pool, tmp=self.tmp_path)
        pool.completer.on_written = lambda c, ok: h.written.put_nowait((c, ok))
        pool.start()
        self.h = h
        return h

    async def __aexit__(self, *_: object) -> None:
        assert self.h is not None
        await self.h.pool.stop(grace_seconds=0)
        for executor in self.h.pool.executors.values():
            await executor.close()
        await self.h.store.close()
