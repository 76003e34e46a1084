"""PostgreSQL writes an attempt's row once, when the attempt ends: the claim writes none, the
completion (or the rescue or cancel that ends it) writes the whole row, and until then the
running attempt is read from its occurrence. A row a claim wrote before migration 017 is
completed, never doubled."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from tickwork.drivers.base import OccurrenceCancelOneParams, OccurrenceRescueParams
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.models import Attempt, AttemptOutcome, Claim, OccurrenceState, Overlap
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim_one,
    complete,
    completion,
    seconds,
)


def _rows(url: str, c: Claim) -> list[dict[str, Any]]:
    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:
        return conn.execute(
            "SELECT * FROM attempts WHERE job_id = %s AND scheduled_at = %s ORDER BY number",
            (c.occurrence.job_id, c.occurrence.scheduled_at)).fetchall()


async def _claimed(store: PostgresStore, due: datetime, now: datetime) -> Claim:
    job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
    await add_occurrences(store, job, due)
    return await claim_one(store, now)


async def test_a_running_attempt_has_no_row_and_is_listed_from_its_run(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    store = postgres_store
    c = await _claimed(store, NOW, NOW + seconds(3))
    assert _rows(postgres_url, c) == []
    [running] = await store.attempt_list(c.occurrence.job_id, c.occurrence.scheduled_at)
    assert running == Attempt(
        job_id=c.occurrence.job_id, scheduled_at=NOW, number=1, worker="w1", queued_at=NOW,
        claimed_at=NOW + seconds(3), started_at=None, finished_at=None, outcome=None,
        output=None, error=None)


async def test_the_completion_writes_the_whole_row_once(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    store = postgres_store
    c = await _claimed(store, NOW, NOW + seconds(3))
    await complete(store, NOW + seconds(5), completion(
        c, started_at=NOW + seconds(4), finished_at=NOW + seconds(5), output="ok"))
    [row] = _rows(postgres_url, c)
    assert (row["number"], row["worker"], row["queued_at"], row["claimed_at"],
            row["started_at"], row["finished_at"], row["outcome"], row["output"]) == (
        1, "w1", NOW, NOW + seconds(3), NOW + seconds(4), NOW + seconds(5), "succeeded", "ok")
    assert len(await store.attempt_list(c.occurrence.job_id, NOW)) == 1


async def test_a_retry_keeps_when_the_attempt_was_due_not_when_the_next_is(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    store = postgres_store
    c = await _claimed(store, NOW, NOW + seconds(3))
    await complete(store, NOW + seconds(5), completion(
        c, state=OccurrenceState.RETRYING, started_at=NOW + seconds(4),
        finished_at=NOW + seconds(5), error="boom", due_at=NOW + seconds(60)))
    [row] = _rows(postgres_url, c)
    assert (row["queued_at"], row["outcome"], row["error"]) == (NOW, "failed", "boom")


async def test_a_batch_is_applied_by_position_and_only_an_ending_state_finishes_the_run(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    """The statement numbers the batch's runs itself (WITH ORDINALITY), sets finished_at
    only for a terminal state, and takes when a run that does not retry was due from its
    row: a stale result among them is fenced off, at its own place."""
    store = postgres_store
    jobs = [await add_job(store, name, overlap=Overlap.ALLOW_ALL) for name in "abcd"]
    for i, job in enumerate(jobs):
        await add_occurrences(store, job, NOW + seconds(i))
    claims = [await claim_one(store, NOW + seconds(10)) for _ in jobs]
    end = NOW + seconds(12)
    applied = await complete(store, end, completion(claims[0], finished_at=end),
                             completion(claims[1], state=OccurrenceState.RETRYING, error="x",
                                        finished_at=end, due_at=NOW + seconds(60)),
                             completion(claims[2], attempt=7),  # stale: another attempt's
                             completion(claims[3], state=OccurrenceState.DEAD, error="y",
                                        finished_at=end))
    assert applied == [True, True, False, True]
    runs = [await store.occurrence_get(c.occurrence.job_id, c.occurrence.scheduled_at)
            for c in claims]
    assert [(r.state, r.finished_at) for r in runs] == [
        (OccurrenceState.SUCCEEDED, end), (OccurrenceState.RETRYING, None),
        (OccurrenceState.RUNNING, None), (OccurrenceState.DEAD, end)]
    rows = [_rows(postgres_url, c) for c in claims]
    assert [[(r["queued_at"], r["finished_at"]) for r in rs] for rs in rows] == [
        [(c.occurrence.due_at, end)] if i != 2 else [] for i, c in enumerate(claims)]


async def test_a_row_written_by_a_claim_before_the_migration_is_completed_not_doubled(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    store = postgres_store
    c = await _claimed(store, NOW, NOW + seconds(3))
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as the claim wrote it
        conn.execute("INSERT INTO attempts (job_id, scheduled_at, number, worker, queued_at, "
                     "claimed_at) VALUES (%s, %s, 1, 'w1', %s, %s)",
                     (c.occurrence.job_id, NOW, NOW, NOW + seconds(3)))
    listed = await store.attempt_list(c.occurrence.job_id, NOW)
    assert [(a.number, a.finished_at) for a in listed] == [(1, None)]
    await complete(store, NOW + seconds(5), completion(c, started_at=NOW + seconds(4)))
    [row] = _rows(postgres_url, c)
    assert (row["outcome"], row["started_at"]) == ("succeeded", NOW + seconds(4))


async def test_a_batch_with_a_row_from_before_the_migration_completes_every_attempt_once(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    """The plain insert fails on the old row: the whole batch (in a transaction, since one
    result is a retry) is written again completing it, and the others are written once."""
    store = postgres_store
    old_job = await add_job(store, "old", overlap=Overlap.ALLOW_ALL)
    new_job = await add_job(store, "new", overlap=Overlap.ALLOW_ALL)
    await add_occurrences(store, old_job, NOW)
    await add_occurrences(store, new_job, NOW)
    old, new = await claim_one(store, NOW + seconds(3)), await claim_one(store, NOW + seconds(3))
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as the claim wrote it
        conn.execute("INSERT INTO attempts (job_id, scheduled_at, number, worker, queued_at, "
                     "claimed_at) VALUES (%s, %s, 1, 'w1', %s, %s)",
                     (old.occurrence.job_id, NOW, NOW, NOW + seconds(3)))
    applied = await complete(store, NOW + seconds(5), completion(
        new, state=OccurrenceState.RETRYING, started_at=NOW + seconds(4), error="boom",
        due_at=NOW + seconds(60)), completion(old, started_at=NOW + seconds(4)))
    assert applied == [True, True]
    [old_row], [new_row] = _rows(postgres_url, old), _rows(postgres_url, new)
    assert (old_row["outcome"], old_row["started_at"]) == ("succeeded", NOW + seconds(4))
    assert (new_row["outcome"], new_row["error"]) == ("failed", "boom")
    retrying = await store.occurrence_get(new.occurrence.job_id, NOW)
    done = await store.occurrence_get(old.occurrence.job_id, NOW)
    assert (retrying.state, retrying.attempt, done.state) == (
        OccurrenceState.RETRYING, 1, OccurrenceState.SUCCEEDED)


async def test_a_rescue_writes_the_crashed_attempt_with_its_claim(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    store = postgres_store
    c = await _claimed(store, NOW, NOW + seconds(3))
    late = c.occurrence.lease_until + seconds(1)
    [rescued] = await store.occurrence_rescue(OccurrenceRescueParams(now=late))
    assert rescued.attempt == 1
    [row] = _rows(postgres_url, c)
    assert (row["worker"], row["queued_at"], row["claimed_at"], row["finished_at"],
            row["outcome"]) == ("w1", NOW, NOW + seconds(3), late, AttemptOutcome.CRASHED.value)


async def test_a_cancel_writes_the_stopped_attempt(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    store = postgres_store
    c = await _claimed(store, NOW, NOW + seconds(3))
    await store.occurrence_cancel_one(OccurrenceCancelOneParams(
        job_id=c.occurrence.job_id, scheduled_at=NOW, now=NOW + seconds(9), actor="ops"))
    [row] = _rows(postgres_url, c)
    assert (row["claimed_at"], row["finished_at"], row["outcome"]) == (
        NOW + seconds(3), NOW + seconds(9), "failed")
    assert row["error"]
