"""SQLite's hot reads walk their index in order: their cost does not grow with the table."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.drivers.sqlite.claims import _FRESH_CANDIDATES, Q
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.models import Job
from tickwork.testing.factories import NOW, add_job, add_occurrences, seconds

ARGS = {"queue": "default", "now": 0, "hour": 0, "limit": 10, "top": 0, "after": 0}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(f"sqlite:///{tmp_path}/t.db")
    await s.migrate()
    yield s
    await s.close()


def _steps(path: Path, sql: str) -> int:
    """The virtual machine instructions SQLite runs to answer: work, not time."""
    count = 0

    def tick() -> int:
        nonlocal count
        count += 1
        return 0

    with sqlite3.connect(path) as conn:
        conn.set_progress_handler(tick, 1)
        conn.execute(sql, ARGS).fetchall()
    return count


async def _waiting(store: SqliteStore, jobs: list[Job], start: int, n: int) -> None:
    for job in jobs:
        await add_occurrences(store, job, *(NOW + seconds(start + i) for i in range(n)))


async def test_the_next_due_question_costs_the_same_with_ten_times_the_waiting_rows(
        store: SqliteStore, tmp_path: Path) -> None:
    """Once MIN(due_at) over every waiting row of the queue: 14 % of the store thread in W1 at
    100,000 jobs. It now reads a row per priority, in the order of occurrences_due."""
    jobs = [await add_job(store, f"p{priority}", priority=priority) for priority in (0, 5)]
    await _waiting(store, jobs, 0, 40)
    few = _steps(tmp_path / "t.db", Q["occurrence_next_due"])
    await _waiting(store, jobs, 40, 360)
    many = _steps(tmp_path / "t.db", Q["occurrence_next_due"])
    assert many < few * 1.5, (few, many)
    assert await store.occurrence_next_due("default", NOW) == NOW


@pytest.mark.parametrize("name", ["occurrence_candidates", "fresh"])
async def test_claim_candidates_follow_the_due_index_without_a_sort(
        store: SqliteStore, tmp_path: Path, name: str) -> None:
    await _waiting(store, [await add_job(store, "j")], 0, 50)
    with sqlite3.connect(tmp_path / "t.db") as conn:
        plan = "\n".join(str(r[3]) for r in conn.execute(
            "EXPLAIN QUERY PLAN " + (_FRESH_CANDIDATES if name == "fresh" else Q[name]), ARGS))
    assert "USING INDEX occurrences_due" in plan, plan
    assert "TEMP B-TREE" not in plan, plan


async def test_the_planners_two_walks_each_use_their_own_index(
        store: SqliteStore, tmp_path: Path) -> None:
    """Every job due within the horizon through jobs_due, the one-off ones due within the
    longer horizon through jobs_due_once: neither scans the table."""
    with sqlite3.connect(tmp_path / "t.db") as conn:
        plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + Q["job_due"], {
            "until": 1, "until_once": 2, "shards": None, "limit": 10})]
    assert any(step.startswith("SEARCH jobs USING INDEX jobs_due ") for step in plan), plan
    assert any(step.startswith("SEARCH jobs USING INDEX jobs_due_once ") for step in plan), plan
    assert not any(step.startswith("SCAN jobs") for step in plan), plan
