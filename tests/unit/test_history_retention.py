"""History and audit retention on both drivers: the pruner deletes finished runs with their
attempts and old audit entries in bounded batches, and keeps unfinished runs however old; the
namespaces' run counts of past hours go with them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import cast

import psycopg
import pytest

from tickwork.clock import FakeClock
from tickwork.config import Settings
from tickwork.drivers.base import AuditListParams, OccurrenceListParams, Store
from tickwork.drivers.history import HistoryPruneParams, HistoryStore, PartitionsEnsureParams
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.models import OccurrenceState, Overlap
from tickwork.runtime import assemble
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


@pytest.fixture
def store(each_store: Store) -> Store:
    """Both stores (conftest's each_store)."""
    return each_store


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
    # The running attempt of the run kept stays listed: PostgreSQL drops attempts by their
    # day, but writes a running attempt's row only when it ends (it is read from its run).
    [running] = await store.attempt_list(old.id, NOW + seconds(4))
    assert (running.number, running.finished_at) == (1, None)
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


HOUR = timedelta(hours=1)


async def test_a_retention_of_a_fraction_of_a_day_prunes_by_its_cutoff(store: Store) -> None:
    # The day's partition exists first: on PostgreSQL the attempts sit in a partition kept.
    await store.history_partitions_ensure(PartitionsEnsureParams(now=NOW, days_ahead=1))
    at = NOW + 10 * HOUR
    old = await add_job(store, "old", now=at, overlap=Overlap.ALLOW_ALL)
    await add_occurrences(store, old, *(at + seconds(i) for i in range(6)), now=at)
    claims = (await claim(store, at + seconds(10), limit=6)).claims
    assert len(claims) == 6
    done = [completion(c, started_at=c.occurrence.scheduled_at) for c in claims[:4]]
    # The fifth waits for a retry after a finished attempt, the sixth still runs: both kept.
    retry = completion(claims[4], state=OccurrenceState.SCHEDULED,
                       started_at=at + seconds(4), due_at=NOW + 30 * DAY)
    await complete(store, at + seconds(10), *done, retry)
    recent = await add_job(store, "recent", now=NOW + 12 * HOUR)
    await add_occurrences(store, recent, NOW + 12 * HOUR, now=NOW + 12 * HOUR)
    [c] = (await claim(store, NOW + 12 * HOUR)).claims
    await complete(store, NOW + 12 * HOUR, completion(c, started_at=NOW + 12 * HOUR))

    # One hour: at 12:30 the cutoff is 11:30, after the old runs and before the recent one.
    pruner = Pruner(store=store, clock=FakeClock(NOW),  # type: ignore[arg-type]
                    retention_days=1 / 24, batch_size=3)
    first = await pruner.run_once(NOW + 12.5 * HOUR)
    assert (first.occurrences_deleted, first.attempts_deleted) == (3, 3)
    assert first.partitions_dropped == []
    assert await pruner.tick(NOW + 12.5 * HOUR) is False  # the fourth, then nothing left
    assert (await pruner.run_once(NOW + 12.5 * HOUR)).attempts_deleted == 0

    left = await store.occurrence_list(OccurrenceListParams(job_id=old.id))
    assert sorted(o.scheduled_at for o in left) == [at + seconds(4), at + seconds(5)]
    for i in range(4):
        assert await store.attempt_list(old.id, at + seconds(i)) == []
    assert len(await store.attempt_list(old.id, at + seconds(4))) == 1
    assert len(await store.attempt_list(old.id, at + seconds(5))) == 1
    assert len(await store.occurrence_list(OccurrenceListParams(job_id=recent.id))) == 1
    assert len(await store.attempt_list(recent.id, NOW + 12 * HOUR)) == 1


async def test_whole_days_leave_the_partition_kept_to_its_drop(
    store: Store, request: pytest.FixtureRequest,
) -> None:
    """Whole days cost no DELETE of attempts on PostgreSQL: the cutoff's day waits for its
    partition to be dropped whole, while SQLite deletes the run's attempts with it."""
    await store.history_partitions_ensure(PartitionsEnsureParams(now=NOW, days_ahead=1))
    job = await add_job(store, "j", now=NOW + HOUR)
    await add_occurrences(store, job, NOW + HOUR, now=NOW + HOUR)
    [c] = (await claim(store, NOW + HOUR)).claims
    await complete(store, NOW + HOUR, completion(c, started_at=NOW + HOUR))
    if isinstance(store, PostgresStore):
        async with await psycopg.AsyncConnection.connect(
                request.getfixturevalue("postgres_url")) as conn:
            rows = await (await conn.execute(
                "SELECT tableoid::regclass::text FROM attempts")).fetchall()
        assert rows == [("attempts_p20300101",)]

    pruner = Pruner(store=store, clock=FakeClock(NOW), retention_days=1)  # type: ignore[arg-type]
    pruned = await pruner.run_once(NOW + DAY + 2 * HOUR)  # cutoff 02:00 on the first day
    assert pruned.occurrences_deleted == 1
    assert pruned.partitions_dropped == []
    kept = 1 if isinstance(store, PostgresStore) else 0
    assert len(await store.attempt_list(job.id, NOW + HOUR)) == kept
    assert pruned.attempts_deleted == 1 - kept


async def test_the_pruner_takes_its_pace_and_retention_from_the_settings(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/t.db")
    settings = Settings(retention_days=0.5, prune_interval_seconds=30.0)
    try:
        pruner = assemble.pruner(settings, store=store, clock=FakeClock(NOW))
    finally:
        await store.close()
    assert pruner.interval_seconds == 30.0
    assert pruner.retention == 12 * HOUR
    assert assemble.pruner(Settings(), store=store, clock=FakeClock(NOW)).interval_seconds == 600
