"""Store conformance, part three: claims by key and the waiting list (the Redis path).

``occurrence_claim_keys`` claims occurrences a dispatch delivered, with the same catch-up and
overlap decisions as ``occurrence_claim``; ``occurrence_waiting`` pages through what waits, in
key order, for the reconciler. Mixed into ``StoreConformance``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from tickwork.drivers.admin import QueueSetPausedParams
from tickwork.drivers.base import (
    JobDeleteParams,
    JobSetPausedParams,
    KeyClaimResult,
    OccurrenceClaimKeysParams,
    OccurrenceInsertParams,
    OccurrenceRescueParams,
    OccurrenceWaitingParams,
    Store,
)
from tickwork.models import Job, OccurrenceState, Overlap, Trigger
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim_one,
    complete,
    completion,
    new_occurrence,
    seconds,
)

S = OccurrenceState


async def claim_keys(store: Store, now: datetime, *keys: tuple[str, datetime],
                     worker: str = "w1") -> KeyClaimResult:
    return await store.occurrence_claim_keys(OccurrenceClaimKeysParams(
        keys=keys, worker=worker, now=now))


async def _waiting(store: Store, queue: str = "default", *, after: tuple[str, datetime] | None
                   = None, limit: int = 100, due_before: datetime | None = None
                   ) -> list[tuple[str, float]]:
    rows = await store.occurrence_waiting(OccurrenceWaitingParams(
        queue=queue, after=after, limit=limit, due_before=due_before))
    return [(w.job_id, (w.scheduled_at - NOW).total_seconds()) for w in rows]


def _key(job: Job, offset: float) -> tuple[str, datetime]:
    return (job.id, NOW + seconds(offset))


class KeyConformance:
    class TestOccurrenceClaimKeys:
        async def test_claims_due_keys_like_a_claim(self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL, priority=3)
            await add_occurrences(store, job, NOW - seconds(5), NOW)
            result = await claim_keys(store, NOW + seconds(1), _key(job, 0), _key(job, -5),
                                      worker="w9")
            assert [c.occurrence.scheduled_at for c in result.claims] == [
                NOW - seconds(5), NOW]
            for c in result.claims:
                occ = c.occurrence
                assert (occ.state, occ.attempt, occ.worker) == (S.RUNNING, 1, "w9")
                assert occ.lease_until == NOW + seconds(36)
                assert c.job.id == job.id
            assert (result.not_due, result.gone) == ([], [])
            (a,) = await store.attempt_list(job.id, NOW)
            assert (a.number, a.worker) == (1, "w9")

        async def test_not_due_yet_comes_back_with_its_due_time(self, store: Store) -> None:
            job = await add_job(store, "j")
            await store.occurrence_insert(OccurrenceInsertParams(occurrences=[
                new_occurrence(job, NOW, due_at=NOW + seconds(3))], now=NOW))
            result = await claim_keys(store, NOW + seconds(1), _key(job, 0))
            assert result.claims == []
            assert result.not_due == [(job.id, NOW, NOW + seconds(3))]
            assert (await store.occurrence_get(job.id, NOW)).state is S.SCHEDULED

        async def test_gone_keys(self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, job, NOW - seconds(2), NOW - seconds(1), NOW)
            done = await claim_one(store, NOW)
            await complete(store, NOW, completion(done))
            await claim_one(store, NOW)  # running
            result = await claim_keys(store, NOW, _key(job, -2), _key(job, -1),
                                      _key(job, 99), ("nobody", NOW))
            assert result.claims == []
            assert sorted(result.gone) == sorted(
                [_key(job, -2), _key(job, -1), _key(job, 99), ("nobody", NOW)])
            deleted = await add_job(store, "d")
            await add_occurrences(store, deleted, NOW)
            await store.job_delete(JobDeleteParams(id=deleted.id, now=NOW))
            assert (await claim_keys(store, NOW, _key(deleted, 0))).gone == [_key(deleted, 0)]

        async def test_a_key_is_claimed_once(self, store: Store, peer_store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, job, *(NOW - seconds(i) for i in range(20)))
            keys = [_key(job, -i) for i in range(20)]
            results = await asyncio.gather(*(
                claim_keys(s, NOW, *keys, worker=f"w{n}")
                for n, s in enumerate((store, peer_store, store, peer_store))))
            claimed = [c.key for r in results for c in r.claims]
            assert sorted(claimed) == sorted(keys)
            again = await claim_keys(store, NOW, *keys)
            assert (again.claims, sorted(again.gone)) == ([], sorted(keys))

        async def test_paused_job_or_queue_is_not_due(self, store: Store) -> None:
            job = await add_job(store, "j", next_run_at=NOW)
            await add_occurrences(store, job, NOW - seconds(1))
            await store.job_set_paused(
                JobSetPausedParams(id=job.id, paused=True, next_run_at=NOW, now=NOW))
            result = await claim_keys(store, NOW, _key(job, -1))
            assert (result.claims, result.not_due) == ([], [(*_key(job, -1), NOW - seconds(1))])
            await store.job_set_paused(
                JobSetPausedParams(id=job.id, paused=False, next_run_at=NOW, now=NOW))
            admin = store.admin()
            await admin.queue_set_paused(QueueSetPausedParams("default", True, NOW))
            result = await claim_keys(store, NOW, _key(job, -1))
            assert (result.claims, len(result.not_due)) == ([], 1)
            await admin.queue_set_paused(QueueSetPausedParams("default", False, NOW))
            assert len((await claim_keys(store, NOW, _key(job, -1))).claims) == 1

        async def test_catchup_and_overlap_as_a_claim(self, store: Store) -> None:
            old = await add_job(store, "old", catchup_window_seconds=60)
            await add_occurrences(store, old, NOW - seconds(120))
            skip = await add_job(store, "skip")
            buffered = await add_job(store, "buffered", overlap=Overlap.BUFFER_ALL)
            await add_occurrences(store, skip, NOW - seconds(10), NOW - seconds(5))
            await add_occurrences(store, buffered, NOW - seconds(10), NOW - seconds(5))
            result = await claim_keys(store, NOW, _key(old, -120), _key(skip, -10),
                                      _key(skip, -5), _key(buffered, -10), _key(buffered, -5))
            assert sorted((c.job.spec.name, c.occurrence.scheduled_at) for c in
                          result.claims) == [("buffered", NOW - seconds(10)),
                                             ("skip", NOW - seconds(10))]
            assert (result.missed, result.skipped) == (1, 1)
            assert result.not_due == [(*_key(buffered, -5), NOW - seconds(5))]
            assert (await store.occurrence_get(old.id, NOW - seconds(120))).state is S.MISSED
            assert (await store.occurrence_get(skip.id, NOW - seconds(5))).state is \
                S.SKIPPED_OVERLAP

        async def test_retrying_key_claims_the_next_attempt(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW, trigger=Trigger.MANUAL)
            first = await claim_one(store, NOW)
            await complete(store, NOW, completion(first, state=S.RETRYING,
                                                  due_at=NOW + seconds(10)))
            assert (await claim_keys(store, NOW + seconds(5), _key(job, 0))).not_due == [
                (*_key(job, 0), NOW + seconds(10))]
            (c,) = (await claim_keys(store, NOW + seconds(10), _key(job, 0))).claims
            assert c.occurrence.attempt == 2

        async def test_a_rescued_key_reruns_and_newer_keys_are_skipped(
                self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW)
            await claim_one(store, NOW)
            await add_occurrences(store, job, NOW + seconds(1), NOW + seconds(2))
            back = NOW + seconds(5)
            await store.occurrence_rescue(OccurrenceRescueParams(now=back, all_but_worker="w2"))
            # Delivered in due order: the newer ticks come before the rescued run.
            result = await claim_keys(store, back, _key(job, 1), _key(job, 2), _key(job, 0),
                                      worker="w2")
            assert [(c.occurrence.scheduled_at, c.occurrence.attempt)
                    for c in result.claims] == [(NOW, 2)]
            assert (result.skipped, result.not_due) == (2, [])
            assert (await store.occurrence_get(*_key(job, 1))).state is S.SKIPPED_OVERLAP

    class TestOccurrenceWaiting:
        async def test_waiting_in_key_order_paged(self, store: Store) -> None:
            a = await add_job(store, "a", overlap=Overlap.ALLOW_ALL)
            b = await add_job(store, "b", overlap=Overlap.ALLOW_ALL)
            other = await add_job(store, "m", queue="mail")
            await add_occurrences(store, a, NOW, NOW + seconds(5), NOW - seconds(5))
            await add_occurrences(store, b, NOW)
            await add_occurrences(store, other, NOW)
            everything = sorted([(a.id, 0.0), (a.id, 5.0), (a.id, -5.0), (b.id, 0.0)])
            assert await _waiting(store) == everything
            first = await _waiting(store, limit=3)
            assert first == everything[:3]
            last = (first[-1][0], NOW + seconds(first[-1][1]))
            assert await _waiting(store, after=last) == everything[3:]
            assert await _waiting(store, due_before=NOW) == [(a.id, -5.0)]
            assert await _waiting(store, "mail") == [(other.id, 0.0)]

        async def test_waiting_leaves_out_running_finished_paused_deleted(
                self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, job, NOW - seconds(1), NOW)
            await claim_one(store, NOW)
            assert await _waiting(store) == [(job.id, 0.0)]
            (w,) = await store.occurrence_waiting(OccurrenceWaitingParams("default"))
            assert (w.due_at, w.priority) == (NOW, 0)
            await store.job_set_paused(
                JobSetPausedParams(id=job.id, paused=True, next_run_at=None, now=NOW))
            assert await _waiting(store) == []
            gone = await add_job(store, "gone")
            await add_occurrences(store, gone, NOW)
            await store.job_delete(JobDeleteParams(id=gone.id, now=NOW))
            assert await _waiting(store) == []
