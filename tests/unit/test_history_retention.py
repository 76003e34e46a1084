"""History and audit retention on both drivers: the pruner deletes finished runs with their
attempts and old audit entries in bounded batches, and keeps unfinished runs however old; the
namespaces' run counts of past hours go with them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest

from tickwork.clock import FakeClock
from tickwork.drivers.base import AuditListParams, OccurrenceListParams, Store
from tickwork.drivers.history import HistoryPruneParams, HistoryStore
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.models import OccurrenceState, Overlap
from tickwork.scheduler.pruner import Pruner
from tickwork.testing.conformance.namespaces import T, due_runs, runs_this_hour, set_runs_quota
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim,
    complete,
    completion,
    seconds,
)

DAY = timedelta(days=1)


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s: SqliteStore | PostgresStore
    if request.param == "sqlite":
        s = SqliteStore(f"sqlite:///{tmp_path}/t.db")
    else:
        s = PostgresStore(request.getfixturevalue("postgres_url"))
    await s.migrate()
    yield s
    await s.close()


async def test_finished_runs_attempts_and_old_audit_entries_go(store: Store) -> None:
    old = await add_job(store, "old", now=NOW,  # its audit entry is written at NOW
                        overlap=Overlap.ALLOW_ALL)
    await add_occurrences(store, old, *(NOW + seconds(i) for i in range(5)))
    result = await claim(store, NOW + seconds(10), limit=5)
    assert len(result.claims) == 5
    await complete(store, NOW + seconds(10), *[
        completion(c, started_at=c.occurrence.scheduled_at) for c in result.claims[:4]])
    # The fifth stays running: unfinished runs are never pruned, however old.
    recent = await add_job(store, "recent", now=NOW + 20 * DAY)
    await add_occurrences(store, recent, NOW + 20 * DAY)
    [c] = (await claim(store, NOW + 20 * DAY)).claims
    await complete(store, NOW + 20 * DAY, completion(c, started_at=NOW + 20 * DAY))

    pruner = Pruner(store=store, clock=FakeClock(NOW), retention_days=10,  # type: ignore[arg-type]
                    audit_retention_days=15, batch_size=3)
    first = await pruner.run_once(NOW + 25 * DAY)
    assert (first.occurrences_deleted, first.audit_deleted) == (3, 1)
    assert first.attempts_deleted in (0, 3)  # PostgreSQL drops attempts with their partition
    second = await pruner.run_once(NOW + 25 * DAY)
    assert (second.occurrences_deleted, second.audit_deleted) == (1, 0)
    left = await store.occurrence_list(OccurrenceListParams(job_id=old.id))
    assert [(o.scheduled_at, o.state) for o in left] == [
        (NOW + seconds(4), OccurrenceState.RUNNING)]
    for at in range(4):
        assert await store.attempt_list(old.id, NOW + seconds(at)) == []
    # SQLite keeps the attempts of a run it keeps; PostgreSQL drops attempts by their day.
    kept = 1 if isinstance(store, SqliteStore) else 0
    assert len(await store.attempt_list(old.id, NOW + seconds(4))) == kept
    assert len(await store.occurrence_list(OccurrenceListParams(job_id=recent.id))) == 1
    assert len(await store.attempt_list(recent.id, NOW + 20 * DAY)) == 1
    assert [e.job_name for e in await store.audit_list(AuditListParams())] == ["recent"]


async def test_past_hours_of_namespace_run_counts_go_with_the_history(store: Store) -> None:
    await due_runs(store, "a", 1)
    await set_runs_quota(store, "a", 10)
    assert len((await claim(store, T)).claims) == 1
    history = cast(HistoryStore, store)
    await history.history_prune(HistoryPruneParams(before=T))  # its hour is not over yet
    assert await runs_this_hour(store, "a", T) == 1
    await history.history_prune(HistoryPruneParams(before=T + seconds(3600)))
    assert await runs_this_hour(store, "a", T) == 0  # the hour's count is gone
