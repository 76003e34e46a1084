"""Store conformance: enqueue with dedupe keys, and the purge of finished and deleted job
definitions. A driver's test subclasses ``EnqueueConformance`` with the ``store`` and
``peer_store`` fixtures of ``StoreConformance``. Instants come from ``factories.NOW``; no
test reads a clock or sleeps."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from tickwork.drivers.base import (
    JobAdvance,
    JobAdvanceManyParams,
    JobCreateParams,
    JobDeleteParams,
    JobSetPausedParams,
    Store,
)
from tickwork.drivers.enqueue import (
    Enqueued,
    EnqueueItem,
    JobEnqueueParams,
    JobPurgeParams,
    JobsPurged,
)
from tickwork.errors import Conflict, JobNotFound
from tickwork.models import Job, OccurrenceState, ScheduleSpec
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim_one,
    complete,
    completion,
    job_spec,
    seconds,
)

__all__ = ["EnqueueConformance"]

WINDOW = seconds(3600)


def item(name: str, key: str | None = None, *, now: datetime = NOW,
         at: datetime = NOW) -> EnqueueItem:
    spec = job_spec(name, schedule=ScheduleSpec(type="at", at=at))
    return EnqueueItem(create=JobCreateParams(spec=spec, next_run_at=at, now=now),
                       dedupe_key=key, dedupe_until=None if key is None else now + WINDOW)


async def enqueue(store: Store, *items: EnqueueItem, now: datetime = NOW) -> list[Enqueued]:
    return await store.job_enqueue(JobEnqueueParams(items=items, now=now))


async def finished_one_off(store: Store, name: str, *, at: datetime = NOW) -> Job:
    """A one-off job at ``at``, planned (no next run) and run: it succeeded at ``at + 1 s``."""
    [done] = await enqueue(store, item(name, at=at), now=at)
    job = done.job
    await add_occurrences(store, job, at, now=at)
    await store.job_advance_many(_advance(job, at))
    running = await claim_one(store, at)
    assert await complete(store, at, completion(running, started_at=at)) == [True]
    return job


def _advance(job: Job, at: datetime) -> JobAdvanceManyParams:
    """The planner's move of a one-off job past its only run."""
    return JobAdvanceManyParams(advances=[JobAdvance(
        job_id=job.id, expected_next_run_at=at, occurrences=[], next_run_at=None)], now=at)


async def purge(store: Store, before: datetime, *, limit: int = 1000) -> JobsPurged:
    return await store.job_purge(JobPurgeParams(before=before, now=before, limit=limit))


class EnqueueConformance:
    # -- enqueue ------------------------------------------------------------------------------

    async def test_enqueue_without_key_creates_each(self, store: Store) -> None:
        done = await enqueue(store, item("a"), item("b"))
        assert [(d.created, d.job.spec.name) for d in done] == [(True, "a"), (True, "b")]
        assert (await store.job_get("b")).next_run_at == NOW

    async def test_enqueue_with_held_key_returns_the_holder(self, store: Store) -> None:
        [first] = await enqueue(store, item("a", "order-1"))
        [again] = await enqueue(store, item("b", "order-1"), now=NOW + seconds(10))
        assert (again.created, again.job.id, again.job.spec.name) == (False, first.job.id, "a")
        with pytest.raises(JobNotFound):
            await store.job_get("b")

    async def test_enqueue_after_the_window_creates_again(self, store: Store) -> None:
        [first] = await enqueue(store, item("a", "order-1"))
        later = NOW + WINDOW
        [again] = await enqueue(store, item("b", "order-1", now=later, at=later), now=later)
        assert again.created
        assert again.job.id != first.job.id
        [third] = await enqueue(store, item("c", "order-1", now=later), now=later)
        assert (third.created, third.job.id) == (False, again.job.id)

    async def test_enqueue_batch_with_one_key_creates_one(self, store: Store) -> None:
        done = await enqueue(store, item("a", "k"), item("b", "k"), item("c"))
        assert [d.created for d in done] == [True, False, True]
        assert done[1].job.id == done[0].job.id
        with pytest.raises(JobNotFound):
            await store.job_get("b")

    async def test_enqueue_takes_the_key_of_a_deleted_job(self, store: Store) -> None:
        [first] = await enqueue(store, item("a", "k"))
        await store.job_delete(JobDeleteParams(id=first.job.id, now=NOW))
        [again] = await enqueue(store, item("b", "k"), now=NOW + seconds(1))
        assert (again.created, again.job.spec.name) == (True, "b")

    async def test_enqueue_name_conflict_creates_nothing(self, store: Store) -> None:
        await add_job(store, "taken")
        with pytest.raises(Conflict, match="taken"):
            await enqueue(store, item("fresh", "k"), item("taken"))
        with pytest.raises(JobNotFound):
            await store.job_get("fresh")
        [retry] = await enqueue(store, item("fresh", "k"))
        assert retry.created  # the key went with the rolled-back batch

    async def test_concurrent_enqueues_with_one_key_create_one_job(
            self, store: Store, peer_store: Store) -> None:
        stores = [store, peer_store] * 8
        done = await asyncio.gather(*(
            enqueue(s, item(f"job-{n}", "shared")) for n, s in enumerate(stores)))
        results = [d for [d] in done]
        assert sum(d.created for d in results) == 1
        assert len({d.job.id for d in results}) == 1
        names = [f"job-{n}" for n in range(len(stores))]
        found = [n for n in names if await _exists(store, n)]
        assert found == [next(d.job.spec.name for d in results if d.created)]

    # -- purge --------------------------------------------------------------------------------

    async def test_purge_finished_one_off_after_the_retention(self, store: Store) -> None:
        job = await finished_one_off(store, "once")
        ended = (await store.occurrence_get(job.id, NOW)).finished_at
        assert ended is not None
        assert (await purge(store, ended)).finished == 0
        purged = await purge(store, ended + seconds(1))
        assert (purged.finished, purged.deleted) == (1, 0)
        with pytest.raises(JobNotFound):
            await store.job_get(job.id)
        # history keeps its own retention
        assert (await store.occurrence_get(job.id, NOW)).state is OccurrenceState.SUCCEEDED

    async def test_purge_keeps_what_is_not_done(self, store: Store) -> None:
        later = NOW + seconds(86400)
        paused = await finished_one_off(store, "paused")
        await store.job_set_paused(JobSetPausedParams(id=paused.id, paused=True,
                                                      next_run_at=None, now=NOW))
        await add_job(store, "recurring", next_run_at=None)  # every: not a one-off
        [waiting] = await enqueue(store, item("waiting"))
        await add_occurrences(store, waiting.job, NOW)
        await store.job_advance_many(_advance(waiting.job, NOW))
        [unplanned] = await enqueue(store, item("unplanned", at=later), now=NOW)
        purged = await purge(store, later + seconds(1))
        assert (purged.finished, purged.deleted) == (0, 0)
        for name in ("recurring", "waiting", "unplanned", "paused"):
            assert await _exists(store, name), name
        assert unplanned.created

    async def test_purge_deleted_jobs_after_the_retention(self, store: Store) -> None:
        job = await add_job(store, "gone")
        await store.job_delete(JobDeleteParams(id=job.id, now=NOW))
        assert (await purge(store, NOW)).deleted == 0
        assert await store.job_get_deleted("gone")
        assert (await purge(store, NOW + seconds(1))).deleted == 1
        assert await store.job_get_deleted("gone") == []

    async def test_purge_is_bounded(self, store: Store) -> None:
        for n in range(3):
            await finished_one_off(store, f"once-{n}")
        cut = NOW + seconds(60)
        assert (await purge(store, cut, limit=2)).finished == 2
        assert (await purge(store, cut, limit=2)).finished == 1
        assert (await purge(store, cut, limit=2)).finished == 0

    async def test_purge_releases_dedupe_keys(self, store: Store) -> None:
        [first] = await enqueue(store, item("a", "k"))
        await enqueue(store, item("b", "expired", now=NOW - WINDOW), now=NOW - WINDOW)
        await store.job_delete(JobDeleteParams(id=first.job.id, now=NOW))
        purged = await purge(store, NOW + seconds(1))
        assert (purged.deleted, purged.dedupe_keys) == (1, 2)
        [again] = await enqueue(store, item("c", "k"), now=NOW + seconds(2))
        assert again.created


async def _exists(store: Store, name: str) -> bool:
    try:
        await store.job_get(name)
    except JobNotFound:
        return False
    return True
