"""The vacuumer: on a PostgreSQL server with autovacuum off, tickwork vacuums and analyzes its
own tables (and no others) by the server's thresholds; elsewhere it leaves them be."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork.clock import FakeClock
from tickwork.drivers.postgres.history import TABLES, VacuumRules
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.scheduler.pruner import Pruner
from tickwork.scheduler.vacuumer import Vacuumer
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim,
    complete,
    completion,
)

JOBS = 200


def test_the_thresholds_are_autovacuums() -> None:
    rules = VacuumRules.of({"autovacuum": "off", "autovacuum_vacuum_threshold": "50",
                            "autovacuum_vacuum_scale_factor": "0.2",
                            "autovacuum_analyze_threshold": "100",
                            "autovacuum_analyze_scale_factor": "0.5"})
    assert not rules.server_vacuums
    assert rules.work(live=1000, dead=250, changed=0) == ""  # 50 + 0.2 * 1000 = 250
    assert rules.work(live=1000, dead=251, changed=0) == "VACUUM (ANALYZE)"
    assert rules.work(live=1000, dead=0, changed=600) == ""  # 100 + 0.5 * 1000 = 600
    assert rules.work(live=1000, dead=0, changed=601) == "ANALYZE"
    assert rules.work(live=0, dead=51, changed=0) == "VACUUM (ANALYZE)"
    assert VacuumRules.of({"autovacuum": "on"}).server_vacuums



async def _sql(url: str, *statements: str) -> list[Any]:
    """Runs ``statements`` on a connection of the test's own, its table statistics flushed
    to the server's counters at the end (the vacuumer reads them there)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        rows: list[Any] = []
        for statement in statements:
            cur = await conn.execute(statement)
            rows = await cur.fetchall() if cur.description else []
        await conn.execute("SELECT pg_stat_force_next_flush()")
        await conn.execute("SELECT 1")
        return rows


async def _counts(url: str, table: str) -> tuple[int, int, int]:
    [row] = await _sql(url, "SELECT pg_stat_clear_snapshot()",
                       "SELECT vacuum_count, analyze_count, n_dead_tup FROM pg_stat_user_tables "
                       f"WHERE relname = '{table}'")
    return row[0], row[1], row[2]


async def _server_vacuums(url: str) -> bool:
    [(setting,)] = await _sql(url, "SHOW autovacuum")
    return bool(setting == "on")


async def test_dead_rows_past_the_threshold_are_vacuumed_once(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    for n in range(JOBS):
        await add_job(postgres_store, f"j{n}", now=NOW)
    # Three rewrites of every job row: 3 * JOBS dead rows, past 50 + 0.2 * JOBS.
    await _sql(postgres_url, *["UPDATE jobs SET updated_at = now()"] * 3)
    before = await _counts(postgres_url, "jobs")
    assert before[2] >= 3 * JOBS

    vacuumer = Vacuumer(store=postgres_store, clock=FakeClock(NOW))
    done = await vacuumer.run_once()

    after = await _counts(postgres_url, "jobs")
    if await _server_vacuums(postgres_url):
        assert done == []  # the server's own autovacuum does it
        return
    assert "jobs" in done
    assert after[0] == before[0] + 1  # vacuumed (and analyzed) once, by the server's count
    assert after[1] == before[1] + 1
    assert after[2] == 0  # no dead rows left
    assert "jobs" not in await vacuumer.run_once()  # nothing new since: left alone


async def test_rows_changed_without_dead_ones_are_analyzed(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    """Inserts leave no dead rows, but the planner's statistics go stale: ANALYZE only."""
    if await _server_vacuums(postgres_url):
        pytest.skip("this server runs autovacuum: the vacuumer leaves tables to it")
    await _sql(postgres_url, "INSERT INTO queues (name, paused, updated_at) "
               f"SELECT 'q' || n, false, now() FROM generate_series(1, {JOBS}) n")
    before = await _counts(postgres_url, "queues")
    done = await Vacuumer(store=postgres_store, clock=FakeClock(NOW)).run_once()
    after = await _counts(postgres_url, "queues")
    assert "queues" in done
    assert (after[0], after[1]) == (before[0], before[1] + 1)  # analyzed, not vacuumed


async def test_tables_that_are_not_tickworks_are_left_alone(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    """Another application's table in the same schema, however much it churns."""
    await _sql(postgres_url, "CREATE TABLE theirs (n integer)",
               f"INSERT INTO theirs SELECT generate_series(1, {JOBS})",
               *["UPDATE theirs SET n = n + 1"] * 3)
    before = await _counts(postgres_url, "theirs")
    assert "theirs" not in await Vacuumer(store=postgres_store, clock=FakeClock(NOW)).run_once()
    assert await _counts(postgres_url, "theirs") == before


async def test_the_vacuumers_tables_are_the_schemas(postgres_url: str) -> None:
    """A migration that adds a table adds it to TABLES too (partitions go with their parent)."""
    rows = await _sql(postgres_url, "SELECT c.relname FROM pg_class c "
                      "WHERE c.relnamespace = current_schema()::regnamespace "
                      "AND c.relkind IN ('r', 'p') AND NOT c.relispartition")
    assert sorted(r[0] for r in rows) == sorted(TABLES)


async def test_one_scheduler_vacuums_at_a_time(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    """Another process holding the vacuum lock (a second scheduler at it): this pass does
    nothing and waits for nothing."""
    for n in range(JOBS):
        await add_job(postgres_store, f"j{n}", now=NOW)
    await _sql(postgres_url, *["UPDATE jobs SET updated_at = now()"] * 3)
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as other:
        await other.execute("SELECT pg_advisory_lock(hashtext('tickwork.vacuum'))")
        assert await postgres_store.history_vacuum() == []
    if not await _server_vacuums(postgres_url):
        assert "jobs" in await postgres_store.history_vacuum()  # the lock is free again


async def test_sqlite_needs_none(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/t.db")
    await store.migrate()
    try:
        for n in range(JOBS):
            await add_job(store, f"j{n}", now=NOW)
        assert await Vacuumer(store=store, clock=FakeClock(NOW)).run_once() == []
    finally:
        await store.close()


async def test_a_pruning_pass_that_deletes_wakes_the_vacuumer(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/t.db")
    await store.migrate()
    woken: list[bool] = []
    try:
        job = await add_job(store, "j", now=NOW)
        await add_occurrences(store, job, NOW)
        [c] = (await claim(store, NOW)).claims
        await complete(store, NOW, completion(c, started_at=NOW))
        pruner = Pruner(store=store, clock=FakeClock(NOW), retention_days=1,
                        on_deleted=lambda: woken.append(True))
        assert (await pruner.run_once(NOW + timedelta(days=2))).occurrences_deleted == 1
        assert woken == [True]
        await pruner.run_once(NOW + timedelta(days=2, hours=1))  # nothing left to delete
        assert woken == [True]
    finally:
        await store.close()
