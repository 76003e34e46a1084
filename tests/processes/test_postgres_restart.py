"""The PostgreSQL store, a worker pool and the notification listener through a restart of the
server: a private one per test (``tickwork.testing.faults.pgserver``), since the shared server
serves every other test and is never stopped.

- a connection the server closed while it sat in the pool is not handed out: the first call
  after a restart works;
- while the server is away a call fails at once (not after the pool's wait), the outage is
  logged once, and the first call after it is back works without waiting out a reconnection
  backoff;
- a result that finished while the server was away is written once it is back, as the same
  attempt, with no traceback in the log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.client import AsyncClient
from tickwork.clock import SystemClock
from tickwork.drivers.base import Completion, JobListParams
from tickwork.drivers.postgres.notify import NotifyListener
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.errors import StoreUnavailable
from tickwork.testing import postgres as pg
from tickwork.testing.faults.pgserver import PrivatePostgres
from tickwork.testing.harness import make_executors
from tickwork.worker.pool import WorkerPool

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[PrivatePostgres]:
    s = PrivatePostgres(tmp_path)
    try:
        yield await s.start()
    finally:
        await s.close()


def store_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "tickwork.store"]


async def test_the_first_call_after_a_restart_works(server: PrivatePostgres) -> None:
    store = PostgresStore(server.url)
    try:
        assert await store.job_list(JobListParams()) == []  # the pool holds a connection now
        await server.restart_immediate(0)
        assert await store.job_list(JobListParams()) == [], "not the dead pooled connection"
    finally:
        await store.close()


async def test_while_down_calls_fail_at_once_logged_once_and_work_as_soon_as_it_is_back(
    server: PrivatePostgres, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork.store")
    # One connection: the pool cannot grow past a slot it is still reconnecting, so this
    # shows whether that reconnection notices the server back (psycopg_pool alone would
    # retry at 1, 3, 7, 15 s after the first failure: 7 s late after this 8 s outage).
    store = PostgresStore(server.url, max_pool_size=1)
    loop = asyncio.get_running_loop()
    try:
        await store.job_list(JobListParams())
        await server.stop_immediate()
        down_until = loop.time() + 8
        calls = 0
        while loop.time() < down_until:  # a loop retrying, as the scheduler's and workers' do
            began = loop.time()
            with pytest.raises(StoreUnavailable) as failed:
                await store.job_list(JobListParams())
            assert loop.time() - began < 2, "at once, not after the pool's 10 s wait"
            assert failed.value.logged
            calls += 1
            await asyncio.sleep(0.5)  # the retry interval of such a loop
        await server.start()
        began = loop.time()
        assert await store.job_list(JobListParams()) == []
        assert loop.time() - began < 2, "works as soon as the server is back"
    finally:
        await store.close()
    assert calls >= 10
    lines = store_lines(caplog)
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    assert "retrying until it answers" in lines[0][1]
    assert "answers again, after" in lines[1][1]


async def test_a_result_finished_while_the_server_is_away_is_written_once_it_is_back(
    server: PrivatePostgres, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    store = PostgresStore(server.url, server_clock=True)
    clock = SystemClock()
    pool = WorkerPool(store=store, clock=clock, executors=make_executors(),
                      queues=[("default", 4)], lease_seconds=30, heartbeat_seconds=0.2,
                      poll_interval_seconds=0.2)
    written: asyncio.Queue[tuple[Completion, bool]] = asyncio.Queue()
    pool.completer.on_written = lambda c, ok: written.put_nowait((c, ok))
    listener = NotifyListener(server.url, pool.wake, retry_seconds=0.2)
    client = await AsyncClient.open(server.url)
    name = "through-a-restart"
    gate = pg.gate(name)
    try:
        listener.start()
        await asyncio.wait_for(listener.listening.wait(), 10)
        pool.start()
        await client.create_job({
            "name": name, "schedule": {"every": "1d"}, "kind": "python", "timeout_seconds": 30,
            "payload": {"callable": "tickwork.testing.postgres:gated", "kwargs": {"name": name}}})
        occ = await client.trigger_job(name)
        assert await asyncio.to_thread(gate.started.wait, 10)
        await server.stop_immediate()
        gate.release.set()  # the job finishes while the server is away
        await asyncio.sleep(3)  # the outage: claims, heartbeats and the result all fail
        assert written.empty()
        await server.start()
        completion, applied = await asyncio.wait_for(written.get(), 10)
        assert (completion.attempt, applied) == (1, True)
        run, attempts = await client.get_run(name, occ.scheduled_at)
        assert (run.state.value, [a.number for a in attempts]) == ("succeeded", [1])
        await asyncio.wait_for(listener.listening.wait(), 10)
    finally:
        gate.release.set()
        await listener.stop()
        await pool.stop(grace_seconds=0)
        for executor in pool.executors.values():
            await executor.close()
        await store.close()
        await client.close()
    tickwork = [r for r in caplog.records if r.name.startswith("tickwork.")]
    assert [r.getMessage() for r in tickwork if r.levelno >= logging.ERROR or r.exc_info] == []
    assert [r.levelname for r in tickwork if r.name == "tickwork.store"] == ["WARNING", "INFO"]
    notify = [r.getMessage() for r in tickwork if r.name == "tickwork.notify"]
    assert len(notify) == 2, notify  # lost once (not at every reconnection attempt), back once
    assert "lost" in notify[0]
    assert "listening again" in notify[1]
