"""The SQLite queries of the claim loop read the index meant for them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tickwork.drivers.sqlite import occurrences
from tickwork.drivers.sqlite.store import SqliteStore


def plan(db: Path, name: str) -> str:
    query = occurrences.Q[name]
    with sqlite3.connect(db) as conn:
        rows = conn.execute(f"EXPLAIN QUERY PLAN {query}", [None] * query.count("?"))
        return "\n".join(row[3] for row in rows)


@pytest.fixture
async def db(tmp_path: Path) -> Path:
    store = SqliteStore(f"sqlite:///{tmp_path / 'plans.db'}")
    await store.migrate()
    await store.close()
    return tmp_path / "plans.db"


def test_the_next_due_question_reads_waiting_occurrences_in_due_order(db: Path) -> None:
    # Not every waiting occurrence of the queue: 50 ms a question with 100,000 waiting.
    found = plan(db, "occurrence_next_due")
    assert "USING INDEX occurrences_next_due" in found
    assert "TEMP B-TREE" not in found


def test_claims_read_in_claim_order_and_stop_at_their_limit(db: Path) -> None:
    # Given the other index, SQLite sorted every due occurrence of a burst for each claim.
    found = plan(db, "occurrence_candidates")
    assert "USING INDEX occurrences_due" in found
    assert "TEMP B-TREE" not in found
