"""Sync python jobs each get a thread at once, however many run together.

A sync callable runs in a thread. Queued behind the loop's default executor (min(32, cores + 4)
threads: 6 on two cores), a worker running more sync jobs at once than that made them wait for
a thread while their timeout ran: under load a claimed attempt started seconds late, timed out
mid-run, and its retry ran while the abandoned thread still finished the first attempt (the
same occurrence twice, with no lease expiry).
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tickwork.executors import ExecutorSettings
from tickwork.executors.python import PythonExecutor
from tickwork.outcomes import Success
from tickwork.testing import jobs
from tickwork.testing.jobs import make_context

AT_ONCE = 40  # more than any default executor has threads (at most 32)


def all_set(events: list[threading.Event], within: float) -> int:
    """How many of ``events`` were set by ``within`` seconds from now."""
    deadline = time.monotonic() + within
    return sum(e.wait(max(0.0, deadline - time.monotonic())) for e in events)


async def test_more_sync_jobs_than_default_threads_all_start_at_once() -> None:
    executor = PythonExecutor(ExecutorSettings(python_allowed_modules=("tickwork.testing",)))
    names = [f"threads-{i}" for i in range(AT_ONCE)]
    started = []
    for name in names:
        jobs.EVENTS[name] = threading.Event()
        jobs.EVENTS[f"{name}:started"] = event = threading.Event()
        started.append(event)
    runs = [asyncio.create_task(executor.execute(make_context(
        "python", {"callable": "tickwork.testing.jobs:block_until", "args": [name]})))
        for name in names]
    try:
        with ThreadPoolExecutor(1) as watcher:  # not the default executor: it may be full
            running = await asyncio.get_running_loop().run_in_executor(
                watcher, all_set, started, 5.0)
        assert running == AT_ONCE, f"only {running} of {AT_ONCE} sync jobs got a thread"
    finally:
        for name in names:
            jobs.EVENTS[name].set()
        outcomes = await asyncio.gather(*runs)
        await executor.close()
    assert outcomes == [Success(output="released")] * AT_ONCE
