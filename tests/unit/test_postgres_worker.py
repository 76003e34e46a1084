"""A worker pool on PostgreSQL in this process: NOTIFY wake-ups, and no connection idle in a
transaction while a job runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from tickwork.client import AsyncClient
from tickwork.clock import SystemClock
from tickwork.drivers.base import Completion
from tickwork.drivers.postgres.notify import NotifyListener
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.testing import ledger
from tickwork.testing import postgres as pg
from tickwork.testing.harness import make_executors
from tickwork.worker.pool import WorkerPool


@dataclass
class Worker:
    pool: WorkerPool
    listener: NotifyListener
    client: AsyncClient  # another connection pool, as another process would use
    written: asyncio.Queue[tuple[Completion, bool]] = field(default_factory=asyncio.Queue)

    async def completed(self, timeout: float) -> Completion:
        c, ok = await asyncio.wait_for(self.written.get(), timeout)
        assert ok
        return c


@pytest.fixture
async def worker(postgres_url: str) -> AsyncIterator[Worker]:
    store = PostgresStore(postgres_url, server_clock=True)
    clock = SystemClock()
    # A poll interval far longer than the tests wait: only a notification can wake it in time.
    pool = WorkerPool(store=store, clock=clock, executors=make_executors(), queues=[
        ("default", 4)], lease_seconds=2, heartbeat_seconds=0.2, poll_interval_seconds=60)
    listener = NotifyListener(postgres_url, pool.wake)
    client = await AsyncClient.open(postgres_url)
    w = Worker(pool=pool, listener=listener, client=client)
    pool.completer.on_written = lambda c, ok: w.written.put_nowait((c, ok))
    listener.start()
    await asyncio.wait_for(listener.listening.wait(), 10)
    pool.start()
    yield w
    await listener.stop()
    await pool.stop(grace_seconds=0)
    for executor in pool.executors.values():
        await executor.close()
    await store.close()
    await client.close()


def job_doc(job_name: str, callable_: str, **kwargs: object) -> dict[str, object]:
    """A job that only runs when triggered (no planner runs in these tests)."""
    return {"name": job_name, "schedule": {"every": "1d"}, "kind": "python", "paused": False,
            "payload": {"callable": callable_, "kwargs": kwargs}, "timeout_seconds": 10}


async def test_a_trigger_wakes_a_listening_worker_at_once(worker: Worker, tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    await worker.client.create_job(job_doc("ping", "tickwork.testing.ledger:record",
                                           path=str(path)))
    occ = await worker.client.trigger_job("ping")
    await worker.completed(timeout=5)  # far sooner than the 60 s poll
    keys = [r["key"] for r in ledger.read(path)]
    assert occ.idempotency_key in keys


async def test_no_connection_idles_in_a_transaction_while_a_job_runs(
    worker: Worker, postgres_url: str,
) -> None:
    name = "idle-check"
    gate = pg.gate(name)
    await worker.client.create_job(job_doc(name, "tickwork.testing.postgres:gated", name=name))
    occ = await worker.client.trigger_job(name)
    try:
        assert await asyncio.to_thread(gate.started.wait, 10)
        # A transaction is "idle in transaction" for an instant between its statements; what
        # must never happen is one held open while the job runs. The job runs for over a
        # second here, so a transaction open longer than half of that is one held across it.
        states: list[tuple[str | None, str, bool]] = []
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
            for _ in range(20):  # over a second, across several heartbeats (every 0.2 s)
                cur = await conn.execute(
                    "SELECT state, query, "
                    "       coalesce(clock_timestamp() - xact_start > interval '500 ms', false) "
                    "FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()")
                states += [(r[0], r[1], r[2]) for r in await cur.fetchall()]
                await asyncio.sleep(0.05)
        assert states, "the worker's connections are visible"
        held = [s for s in states if s[0] and s[0].startswith("idle in transaction") and s[2]]
        assert held == []
        assert (await worker.client.get_run(name, occ.scheduled_at))[0].state.value == "running"
    finally:
        gate.release.set()
    await worker.completed(timeout=10)
