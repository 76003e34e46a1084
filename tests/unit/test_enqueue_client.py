"""Enqueue through the Python client (async and sync), in a caller's PostgreSQL transaction,
against the allowlists; and the pruner's purge of finished and deleted definitions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork.client import AsyncClient, Client
from tickwork.client.enqueue import enqueue_in, enqueue_many_in
from tickwork.clock import FakeClock
from tickwork.config import Settings
from tickwork.drivers.base import JobDeleteParams, JobListParams
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import JobNotFound, ValidationError
from tickwork.executors import ExecutorSettings
from tickwork.executors.admission import JobPolicy
from tickwork.metrics import SCHEDULER, Metrics
from tickwork.runtime import assemble
from tickwork.scheduler.pruner import Pruner
from tickwork.testing.conformance.enqueue import finished_one_off
from tickwork.testing.factories import NOW, seconds
from tickwork.testing.harness import START, Harness

HOOK = {"method": "POST", "url": "https://example.org/hook"}
DEMO = ExecutorSettings(python_allowed_modules=("tickwork.cli.demo",))


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(f"sqlite:///{tmp_path}/e.db")
    await store.migrate()
    yield store
    await store.close()


def test_sync_client_enqueues_and_dedupes(tmp_path: Path) -> None:
    clock = FakeClock(START)
    with Client.open(f"sqlite:///{tmp_path}/c.db", clock=clock) as client:
        first = client.enqueue("http", HOOK, dedupe_key="order-7",
                               dedupe_window=timedelta(minutes=5))
        assert first.created
        assert first.job.spec.name.startswith("http-")
        assert (first.job.spec.schedule.at, first.job.next_run_at) == (START, START)
        clock.advance(299)
        assert client.enqueue("http", HOOK, dedupe_key="order-7").job.id == first.job.id
        clock.advance(1)
        assert client.enqueue("http", HOOK, dedupe_key="order-7").created
        later = client.enqueue("http", HOOK, at=START + timedelta(hours=1), queue="mail",
                               retry={"max_attempts": 7}, priority=5, tags=["receipts"])
        spec = later.job.spec
        assert (spec.queue, spec.retry.max_attempts, spec.priority, spec.tags) == (
            "mail", 7, 5, ("receipts",))
        assert later.job.next_run_at == START + timedelta(hours=1)
        many = client.enqueue_many([{"kind": "http", "payload": HOOK}] * 3)
        assert len({d.job.spec.name for d in many}) == 3


async def test_generated_names_sort_by_enqueue_time(sqlite: SqliteStore) -> None:
    client = AsyncClient(sqlite, clock=FakeClock(START))
    names = [(await client.enqueue("http", HOOK)).job.spec.name for _ in range(20)]
    assert len(set(names)) == 20
    millis = [n.removeprefix("http-")[:13] for n in names]  # uuid7: milliseconds first
    assert millis == sorted(millis)
    assert all(n[len("http-") + 14] == "7" for n in names)  # the version digit


@pytest.mark.parametrize("target", [
    "tickwork.cli.demo:platform.os.system",  # walks out of the allowed module
    "os:system",                             # a module that is not allowed
    "tickwork.cli.demo:Fail",                # imported into it from elsewhere
])
async def test_enqueue_checks_the_python_allowlist(sqlite: SqliteStore, target: str) -> None:
    client = AsyncClient(sqlite, clock=FakeClock(START),
                         policy=JobPolicy(DEMO, runs_jobs=True))
    with pytest.raises(ValidationError) as one:
        await client.enqueue("python", {"callable": target, "args": ["id"]})
    assert one.value.field == "payload.callable"
    with pytest.raises(ValidationError) as bulk:
        await client.enqueue_many([
            {"kind": "python", "payload": {"callable": "tickwork.cli.demo:tick"}},
            {"kind": "python", "payload": {"callable": target}}])
    assert bulk.value.field == "[1].payload.callable"
    assert await sqlite.job_list(JobListParams()) == []


async def test_enqueue_checks_the_shell_switch(sqlite: SqliteStore) -> None:
    client = AsyncClient(sqlite, clock=FakeClock(START),
                         policy=JobPolicy(ExecutorSettings(), runs_jobs=True))
    with pytest.raises(ValidationError) as refused:
        await client.enqueue("shell", {"argv": ["/bin/sh", "-c", "id"]})
    assert refused.value.field.startswith("payload")
    assert await sqlite.job_list(JobListParams()) == []


# -- transactional enqueue on PostgreSQL ----------------------------------------------------



async def test_enqueue_in_commits_and_rolls_back_with_the_caller(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        await enqueue_in(conn, "http", HOOK, now=NOW, name="kept-out")
        await conn.rollback()
        async with conn.transaction():
            done = await enqueue_in(conn, "http", HOOK, now=NOW, dedupe_key="k")
            assert await postgres_store.job_list(JobListParams()) == []  # not committed yet
    assert [j.id for j in await postgres_store.job_list(JobListParams())] == [done.job.id]
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        many = await enqueue_many_in(conn, [{"kind": "http", "payload": HOOK,
                                             "dedupe_key": "k"}], now=NOW + seconds(1))
        await conn.commit()
    assert (many[0].created, many[0].job.id) == (False, done.job.id)


async def test_enqueue_in_waits_for_the_transaction_holding_the_key(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    """The second transaction blocks on the key's row until the first commits, then gets
    the first's job: no read-then-write race."""
    async with await psycopg.AsyncConnection.connect(postgres_url) as first, \
            await psycopg.AsyncConnection.connect(postgres_url) as second:
        created = await enqueue_in(first, "http", HOOK, now=NOW, dedupe_key="k")
        racing = asyncio.create_task(enqueue_in(second, "http", HOOK, now=NOW,
                                                dedupe_key="k"))
        await _until_waiting_on_a_lock(postgres_url, second.info.backend_pid)
        assert not racing.done()
        await first.commit()
        held = await racing
        await second.commit()
    assert (held.created, held.job.id) == (False, created.job.id)
    assert len(await postgres_store.job_list(JobListParams())) == 1


async def _until_waiting_on_a_lock(url: str, pid: int, deadline: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as watch:
        while loop.time() < end:
            cur = await watch.execute("SELECT wait_event_type FROM pg_stat_activity "
                                      "WHERE pid = %s", (pid,))
            row = await cur.fetchone()
            if row is not None and row[0] == "Lock":
                return
            await asyncio.sleep(0.01)  # polling with a deadline
    raise AssertionError(f"backend {pid} never waited on a lock")


async def test_concurrent_clients_with_one_key_create_one_job(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    peers = [PostgresStore(postgres_url) for _ in range(3)]
    try:
        clients = [AsyncClient(s, clock=FakeClock(START)) for s in (postgres_store, *peers)]
        done = await asyncio.gather(*(c.enqueue("http", HOOK, dedupe_key="shared")
                                      for c in clients * 4))
    finally:
        for peer in peers:
            await peer.close()
    assert sum(d.created for d in done) == 1
    assert len({d.job.id for d in done}) == 1


# -- the pruner's purge ----------------------------------------------------------------------


async def test_pruner_purges_after_the_retention_and_counts(sqlite: SqliteStore) -> None:
    clock = FakeClock(NOW)
    metrics = Metrics()
    settings = Settings(finished_job_retention_seconds=3600.0)
    pruner = assemble.pruner(settings, store=sqlite, clock=clock, metrics=metrics)
    await finished_one_off(sqlite, "once")
    gone = await finished_one_off(sqlite, "deleted", at=NOW + seconds(5))
    await sqlite.job_delete(JobDeleteParams(id=gone.id, now=NOW + seconds(10)))
    clock.advance(3600)
    await pruner.run_once(clock.now())
    assert metrics.purged == {"finished": 0, "deleted": 0}
    clock.advance(60)
    await pruner.run_once(clock.now())
    assert metrics.purged == {"finished": 1, "deleted": 1}
    with pytest.raises(JobNotFound):
        await sqlite.job_get("once")
    text = metrics.render_process(SCHEDULER)
    assert 'tickwork_jobs_purged_total{reason="finished"} 1.0' in text


async def test_pruner_purges_in_bounded_batches(sqlite: SqliteStore) -> None:
    for n in range(5):
        await finished_one_off(sqlite, f"once-{n}")
    seen: list[Any] = []
    pruner = Pruner(store=sqlite, clock=FakeClock(NOW), jobs=sqlite, purge_batch=2,
                    finished_job_retention_seconds=60.0, on_purged=seen.append)
    later = NOW + seconds(120)
    assert await pruner.tick(later) is True  # a full batch: more may wait
    assert await pruner.tick(later) is True
    assert await pruner.tick(later) is False
    assert [p.finished for p in seen] == [2, 2, 1]


def test_pruner_refuses_a_retention_of_zero(sqlite: SqliteStore) -> None:
    with pytest.raises(ValueError, match="finished_job_retention_seconds"):
        Pruner(store=sqlite, clock=FakeClock(NOW), jobs=sqlite,
               finished_job_retention_seconds=0)


# -- end to end: enqueued, run once, purged --------------------------------------------------


async def test_an_enqueued_job_runs_once_then_is_purged(harness: Harness) -> None:
    from tickwork.testing import ledger

    path = harness.tmp / "ledger.jsonl"
    payload = {"callable": "tickwork.testing.ledger:record", "kwargs": {"path": str(path)}}
    done = await harness.client.enqueue("python", payload, dedupe_key="once")
    held = await harness.client.enqueue("python", payload, dedupe_key="once")
    assert (held.created, held.job.id) == (False, done.job.id)
    await harness.tick()
    ran = await harness.completed()
    assert (ran.job_id, ran.scheduled_at) == (done.job.id, START)
    assert [r["attempt"] for r in ledger.read(path)] == [1]

    pruner = Pruner(store=harness.store, clock=harness.clock, jobs=harness.store,
                    finished_job_retention_seconds=3600.0)
    harness.clock.advance(3000)
    assert (await pruner.purge_once(harness.clock.now())).finished == 0
    harness.clock.advance(700)
    assert (await pruner.purge_once(harness.clock.now())).finished == 1
    with pytest.raises(JobNotFound):
        await harness.client.get_job(done.job.id)
    [run] = await harness.client.list_runs()  # history keeps retention_days
    assert (run.job_id, run.state.value) == (done.job.id, "succeeded")
    again = await harness.client.enqueue("python", payload, dedupe_key="once")
    assert again.created  # its window ended and its job is gone
