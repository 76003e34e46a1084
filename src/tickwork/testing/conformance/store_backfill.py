"""Store conformance: an occurrence's own overlap policy (a backfill's choice).

A backfill may name the overlap policy its runs are claimed under; the store keeps it on each
occurrence, and every claim path (``occurrence_claim``, ``occurrence_claim_keys``, and the
queries that decide what is due) decides such an occurrence by it instead of its job's. An
occurrence without one follows its job, as before. Mixed into ``StoreConformance``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from tickwork.drivers.base import OccurrenceClaimKeysParams, Store
from tickwork.models import Claim, Job, OccurrenceState, Overlap, Trigger
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim,
    claim_one,
    complete,
    completion,
    seconds,
)

S = OccurrenceState
BACKFILL = (-300.0, -200.0, -100.0)  # three past fire times, all due at once


def _at(offsets: tuple[float, ...]) -> list[datetime]:
    return [NOW + seconds(t) for t in offsets]


async def _backfill(store: Store, job: Job, overlap: Overlap | None) -> None:
    await add_occurrences(store, job, *_at(BACKFILL), trigger=Trigger.BACKFILL, overlap=overlap)


async def _states(store: Store, job: Job) -> list[OccurrenceState]:
    return [(await store.occurrence_get(job.id, at)).state for at in _at(BACKFILL)]


async def _skip_job_running(store: Store) -> tuple[Job, Claim]:
    """A ``skip`` job whose scheduled run at NOW is running."""
    job = await add_job(store, "j", overlap=Overlap.SKIP)
    await add_occurrences(store, job, NOW)
    return job, await claim_one(store, NOW)


class BackfillOverlapConformance:
    class TestOccurrenceOverlap:
        async def test_an_occurrence_keeps_its_overlap(self, store: Store) -> None:
            job = await add_job(store, "j")
            (chosen,) = await add_occurrences(store, job, NOW - seconds(10),
                                              trigger=Trigger.BACKFILL,
                                              overlap=Overlap.ALLOW_ALL)
            (own,) = await add_occurrences(store, job, NOW - seconds(5),
                                           trigger=Trigger.BACKFILL)
            assert (chosen.overlap, own.overlap) == (Overlap.ALLOW_ALL, None)
            got = await store.occurrence_get(job.id, NOW - seconds(10))
            assert got.overlap is Overlap.ALLOW_ALL

        async def test_allow_all_runs_every_backfilled_run_of_a_skip_job(
                self, store: Store) -> None:
            job, running = await _skip_job_running(store)
            await _backfill(store, job, Overlap.ALLOW_ALL)
            result = await claim(store, NOW)
            assert sorted(c.occurrence.scheduled_at for c in result.claims) == _at(BACKFILL)
            assert result.skipped == 0
            assert all(c.occurrence.overlap is Overlap.ALLOW_ALL for c in result.claims)
            assert await _states(store, job) == [S.RUNNING] * 3
            assert await complete(store, NOW, completion(running)) == [True]

        async def test_the_jobs_own_skip_skips_them_as_before(self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.SKIP)
            await _backfill(store, job, None)
            result = await claim(store, NOW)
            assert ([c.occurrence.scheduled_at for c in result.claims], result.skipped) == (
                _at(BACKFILL[:1]), 2)
            assert await _states(store, job) == [S.RUNNING, S.SKIPPED_OVERLAP,
                                                 S.SKIPPED_OVERLAP]

        async def test_a_chosen_policy_may_be_stricter_than_the_jobs(
                self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            await _backfill(store, job, Overlap.SKIP)
            result = await claim(store, NOW)
            assert (len(result.claims), result.skipped) == (1, 2)

        async def test_buffer_all_waits_in_the_query_too(self, store: Store) -> None:
            job, running = await _skip_job_running(store)
            await _backfill(store, job, Overlap.BUFFER_ALL)
            result = await claim(store, NOW)
            assert (result.claims, result.skipped) == ([], 0)
            assert await _states(store, job) == [S.SCHEDULED] * 3
            await complete(store, NOW, completion(running))
            (first,) = (await claim(store, NOW)).claims  # one at a time, in order
            assert first.occurrence.scheduled_at == _at(BACKFILL)[0]
            await complete(store, NOW, completion(first))
            (second,) = (await claim(store, NOW)).claims
            assert second.occurrence.scheduled_at == _at(BACKFILL)[1]

        async def test_the_jobs_runs_see_an_allow_all_run_running(
                self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.SKIP)
            await add_occurrences(store, job, NOW - seconds(300), trigger=Trigger.BACKFILL,
                                  overlap=Overlap.ALLOW_ALL)
            await claim_one(store, NOW)
            await add_occurrences(store, job, NOW)  # the job's own run, under skip
            result = await claim(store, NOW)
            assert (result.claims, result.skipped) == ([], 1)

        @pytest.mark.parametrize(("overlap", "claimed", "skipped"), [
            (Overlap.ALLOW_ALL, 3, 0), (None, 0, 3)])
        async def test_claims_by_key_decide_the_same(
                self, store: Store, overlap: Overlap | None, claimed: int, skipped: int
        ) -> None:
            job, _ = await _skip_job_running(store)
            await _backfill(store, job, overlap)
            result = await store.occurrence_claim_keys(OccurrenceClaimKeysParams(
                keys=[(job.id, at) for at in _at(BACKFILL)], worker="w1", now=NOW))
            assert (len(result.claims), result.skipped, result.not_due) == (
                claimed, skipped, [])

        async def test_peers_claim_allow_all_runs_once_each(
                self, store: Store, peer_store: Store) -> None:
            job, _ = await _skip_job_running(store)
            many = [NOW - seconds(i) for i in range(1, 41)]
            await add_occurrences(store, job, *many, trigger=Trigger.BACKFILL,
                                  overlap=Overlap.ALLOW_ALL)
            results = await asyncio.gather(*(
                claim(s, NOW, worker=f"w{i}", limit=5)
                for i, s in enumerate([store, peer_store] * 6)))
            # A claimer locks twice its limit and gives back what it does not take, so a peer
            # may find some runs locked for that moment: they wait for the next claim.
            for _ in range(len(many)):
                more = await claim(store, NOW, worker="w-late", limit=5)
                results.append(more)
                if not more.claims:
                    break
            taken = [c.occurrence.scheduled_at for r in results for c in r.claims]
            assert sorted(taken) == sorted(many)  # every one, none twice
            assert sum(r.skipped for r in results) == 0
