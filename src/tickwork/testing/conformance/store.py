"""The Store conformance suite: every driver passes it (STYLE habit 2).

A driver's test module subclasses ``StoreConformance`` and defines two fixtures:

``store``
    a fresh, migrated store of its own (a SQLite file under ``tmp_path``, a per-test database);
``peer_store``
    a second store on the same database, as another process would open it; used to check that
    concurrent claims never hand out one occurrence twice.

Tests build their instants from ``factories.NOW``; none reads a clock or sleeps.
"""

from __future__ import annotations

import asyncio

import pytest

from tickwork.drivers.base import (
    JobAdvance,
    JobAdvanceManyParams,
    JobSetPausedParams,
    LeaseRef,
    OccurrenceHeartbeatParams,
    OccurrenceInsertParams,
    OccurrenceListParams,
    OccurrenceReleaseParams,
    OccurrenceRescueParams,
    Store,
)
from tickwork.models import (
    AttemptOutcome,
    Claim,
    Job,
    OccurrenceState,
    Overlap,
    Trigger,
)
from tickwork.testing.conformance.chaining import ChainConformance
from tickwork.testing.conformance.store_backfill import BackfillOverlapConformance
from tickwork.testing.conformance.store_control import ControlConformance
from tickwork.testing.conformance.store_jobs import JobConformance
from tickwork.testing.conformance.store_keys import KeyConformance
from tickwork.testing.conformance.store_occurrences import OccurrenceConformance
from tickwork.testing.conformance.store_versions import VersionConformance
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim,
    claim_one,
    complete,
    completion,
    new_occurrence,
    ref,
    seconds,
)

__all__ = ["StoreConformance"]

S = OccurrenceState


async def _state(store: Store, job: Job, offset: float) -> OccurrenceState:
    return (await store.occurrence_get(job.id, NOW + seconds(offset))).state


def _at(claims: list[Claim]) -> list[float]:
    """The claimed occurrences as offsets in seconds from NOW."""
    return [(c.occurrence.scheduled_at - NOW).total_seconds() for c in claims]


async def _busy(store: Store, overlap: Overlap, *due: float) -> tuple[Job, Claim]:
    """A job whose occurrence at NOW runs (claimed by w1), with more occurrences at ``due``."""
    job = await add_job(store, "j", overlap=overlap)
    await add_occurrences(store, job, NOW)
    running = await claim_one(store, NOW)
    await add_occurrences(store, job, *(NOW + seconds(d) for d in due))
    return job, running


class ClaimConformance:
    class TestOccurrenceClaim:
        async def test_occurrence_claim_nothing_due(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW + seconds(1))
            result = await claim(store, NOW)
            assert (result.claims, result.missed, result.skipped, result.cancelled) == (
                [], 0, 0, [])

        async def test_occurrence_claim_due_only(self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            await store.occurrence_insert(OccurrenceInsertParams(occurrences=[
                new_occurrence(job, NOW - seconds(10), due_at=NOW),
                new_occurrence(job, NOW - seconds(5), due_at=NOW + seconds(1)),  # jittered
                new_occurrence(job, NOW + seconds(10)),
            ], now=NOW))
            assert _at((await claim(store, NOW)).claims) == [-10]
            assert _at((await claim(store, NOW + seconds(9))).claims) == [-5]
            assert (await claim(store, NOW + seconds(9))).claims == []
            assert _at((await claim(store, NOW + seconds(10))).claims) == [10]

        async def test_occurrence_claim_priority_then_due_and_limit(self, store: Store) -> None:
            jobs = {}
            for name, priority, due in (("low", 0, -30), ("high", 5, -10), ("high2", 5, -20),
                                        ("mid", 1, -40)):
                jobs[name] = await add_job(store, name, priority=priority)
                await add_occurrences(store, jobs[name], NOW + seconds(due))
            result = await claim(store, NOW, limit=3)
            assert [c.job.spec.name for c in result.claims] == ["high2", "high", "mid"]
            assert await _state(store, jobs["low"], -30) is S.SCHEDULED
            result = await claim(store, NOW, limit=3)
            assert [c.job.spec.name for c in result.claims] == ["low"]

        async def test_a_backlog_keeps_a_share_of_each_claim_for_the_newest_due(
                self, store: Store) -> None:
            """Oldest first, but when a backlog fills the batch half of it goes to the newest
            due, so what comes due while a burst drains is not kept behind all of it."""
            burst = await add_job(store, "burst", overlap=Overlap.ALLOW_ALL)
            await store.occurrence_insert(OccurrenceInsertParams(occurrences=[
                new_occurrence(burst, NOW - seconds(100 - i), due_at=NOW - seconds(10))
                for i in range(20)], now=NOW))
            steady = await add_job(store, "steady", overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, steady, *(NOW - seconds(n) for n in range(6, 0, -1)))
            first = (await claim(store, NOW, limit=8)).claims
            assert sorted(_at([c for c in first if c.job.id == steady.id])) == [-4, -3, -2, -1]
            assert len(first) == 8, "the rest of the batch is the backlog's, oldest first"
            second = (await claim(store, NOW, limit=8)).claims
            assert sorted(_at([c for c in second if c.job.id == steady.id])) == [-6, -5]
            rest = (await claim(store, NOW, limit=100)).claims
            assert len(first) + len(second) + len(rest) == 26, "each claimed once"

        async def test_occurrence_claim_queue_isolation(self, store: Store) -> None:
            job = await add_job(store, "j", queue="mail")
            await add_occurrences(store, job, NOW)
            assert (await claim(store, NOW)).claims == []
            (c,) = (await claim(store, NOW, queue="mail")).claims
            assert (c.occurrence.queue, c.job.id) == ("mail", job.id)

        async def test_occurrence_claim_waits_while_paused(self, store: Store) -> None:
            job = await add_job(store, "j", next_run_at=NOW)
            await add_occurrences(store, job, NOW)
            await store.job_set_paused(
                JobSetPausedParams(id=job.id, paused=True, next_run_at=NOW, now=NOW))
            assert (await claim(store, NOW + seconds(5))).claims == []
            assert await _state(store, job, 0) is S.SCHEDULED
            await store.job_set_paused(JobSetPausedParams(
                id=job.id, paused=False, next_run_at=NOW + seconds(60), now=NOW + seconds(6)))
            (c,) = (await claim(store, NOW + seconds(6))).claims
            assert not c.job.spec.paused

        async def test_occurrence_claim_runs_and_records_attempt(self, store: Store) -> None:
            job = await add_job(store, "j", next_run_at=NOW + seconds(60), priority=2)
            await store.occurrence_insert(OccurrenceInsertParams(occurrences=[
                new_occurrence(job, NOW - seconds(10), due_at=NOW - seconds(5))], now=NOW))
            now = NOW + seconds(1)
            c = await claim_one(store, now, worker="worker-7")
            occ = c.occurrence
            assert (occ.job_id, occ.scheduled_at, occ.due_at) == (
                job.id, NOW - seconds(10), NOW - seconds(5))
            assert (occ.state, occ.attempt, occ.worker) == (S.RUNNING, 1, "worker-7")
            assert occ.lease_until == now + seconds(35)
            assert occ.idempotency_key == f"{job.id}:2029-12-31T23:59:50Z"
            assert await store.occurrence_get(job.id, occ.scheduled_at) == occ
            assert c.job == await store.job_get(job.id)
            (a,) = await store.attempt_list(job.id, occ.scheduled_at)
            assert (a.number, a.worker, a.queued_at, a.claimed_at) == (
                1, "worker-7", NOW - seconds(5), now)
            assert (a.started_at, a.finished_at, a.outcome, a.output, a.error) == (
                None, None, None, None, None)

        @pytest.mark.parametrize(("lease", "job_timeout", "margin", "expected"), [
            (30, 10, 5, 35), (30, 120, 5, 125), (60, 10, 0, 60), (10, 10.5, 2.25, 12.75),
        ])
        async def test_occurrence_claim_lease_length(
            self, store: Store, lease: float, job_timeout: float, margin: float, expected: float
        ) -> None:
            job = await add_job(store, "j", timeout_seconds=job_timeout)
            await add_occurrences(store, job, NOW)
            (c,) = (await claim(store, NOW, lease_seconds=lease,
                                lease_margin_seconds=margin)).claims
            assert c.occurrence.lease_until == NOW + seconds(expected)

        async def test_occurrence_claim_concurrent_never_doubles(
            self, store: Store, peer_store: Store
        ) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, job, *(NOW - seconds(i) for i in range(60)))
            claimed: list[tuple[str, Claim]] = []
            for _ in range(10):
                results = await asyncio.gather(*(
                    claim(s, NOW, worker=f"w{i}", limit=4)
                    for i, s in enumerate([store, peer_store] * 3)))
                claimed += [(f"w{i}", c) for i, r in enumerate(results) for c in r.claims]
                if not any(r.claims for r in results):
                    break
            keys = [c.key for _, c in claimed]
            assert len(keys) == len(set(keys)) == 60
            for worker, c in claimed:
                assert c.occurrence.worker == worker
                (a,) = await store.attempt_list(*c.key)
                assert a.worker == worker

    class TestOccurrenceClaimCatchup:
        async def test_occurrence_claim_misses_past_window(self, store: Store) -> None:
            job = await add_job(store, "j", catchup_window_seconds=60)
            await add_occurrences(store, job, NOW - seconds(120), NOW - seconds(30))
            result = await claim(store, NOW)
            assert _at(result.claims) == [-30]
            assert result.missed == 1
            missed = await store.occurrence_get(job.id, NOW - seconds(120))
            assert (missed.state, missed.attempt, missed.finished_at) == (S.MISSED, 0, NOW)
            assert await store.attempt_list(job.id, NOW - seconds(120)) == []
            assert (await claim(store, NOW + seconds(3600))).claims == []

        async def test_occurrence_claim_keeps_retrying_past_window(self, store: Store) -> None:
            job = await add_job(store, "j", catchup_window_seconds=60)
            await add_occurrences(store, job, NOW)
            c = await claim_one(store, NOW)
            await complete(store, NOW, completion(c, state=S.RETRYING, due_at=NOW + seconds(5)))
            result = await claim(store, NOW + seconds(600))
            assert result.missed == 0
            assert [cl.occurrence.attempt for cl in result.claims] == [2]

        @pytest.mark.parametrize("trigger", [Trigger.MANUAL, Trigger.BACKFILL])
        async def test_occurrence_claim_keeps_triggered_past_window(
            self, store: Store, trigger: Trigger
        ) -> None:
            job = await add_job(store, "j", catchup_window_seconds=60)
            await add_occurrences(store, job, NOW - seconds(7200), trigger=trigger)
            result = await claim(store, NOW)
            assert (_at(result.claims), result.missed) == ([-7200], 0)

    class TestOccurrenceClaimOverlap:
        async def test_occurrence_claim_skip(self, store: Store) -> None:
            job, running = await _busy(store, Overlap.SKIP, 60)
            other = await add_job(store, "other")
            await add_occurrences(store, other, NOW + seconds(60))
            result = await claim(store, NOW + seconds(60))
            assert [c.job.id for c in result.claims] == [other.id]
            assert result.skipped == 1
            skipped = await store.occurrence_get(job.id, NOW + seconds(60))
            assert (skipped.state, skipped.finished_at) == (S.SKIPPED_OVERLAP, NOW + seconds(60))
            assert await _state(store, job, 0) is S.RUNNING
            assert await complete(store, NOW + seconds(61), completion(running)) == [True]

        async def test_occurrence_claim_skip_within_one_batch(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW - seconds(20), NOW - seconds(10))
            result = await claim(store, NOW)
            assert (_at(result.claims), result.skipped) == ([-20], 1)
            assert await _state(store, job, -10) is S.SKIPPED_OVERLAP

        async def test_occurrence_claim_buffer_one(self, store: Store) -> None:
            job, running = await _busy(store, Overlap.BUFFER_ONE, 10, 20, 30)
            result = await claim(store, NOW + seconds(30))
            assert (result.claims, result.skipped) == ([], 2)
            assert [await _state(store, job, t) for t in (10, 20, 30)] == [
                S.SCHEDULED, S.SKIPPED_OVERLAP, S.SKIPPED_OVERLAP]
            assert (await claim(store, NOW + seconds(31))).claims == []
            await complete(store, NOW + seconds(32), completion(running))
            assert _at((await claim(store, NOW + seconds(32))).claims) == [10]

        async def test_occurrence_claim_buffer_all(self, store: Store) -> None:
            job, running = await _busy(store, Overlap.BUFFER_ALL, 10, 20)
            result = await claim(store, NOW + seconds(30))
            assert (result.claims, result.skipped) == ([], 0)
            await complete(store, NOW + seconds(31), completion(running))
            (second,) = (await claim(store, NOW + seconds(31))).claims
            assert _at([second]) == [10]
            assert await _state(store, job, 20) is S.SCHEDULED
            await complete(store, NOW + seconds(32), completion(second))
            assert _at((await claim(store, NOW + seconds(32))).claims) == [20]

        async def test_a_claim_reads_past_what_the_last_one_left_waiting(
            self, store: Store
        ) -> None:
            """A claim reads as many due runs as it has room for; once one left a run waiting
            (buffer_one's, its job busy), the queue's next reads a margin past it."""
            job, _ = await _busy(store, Overlap.BUFFER_ONE, 10, 20)
            others = [await add_job(store, f"o{i:02d}") for i in range(20)]
            for other in others:
                await add_occurrences(store, other, NOW + seconds(30))
            first = await claim(store, NOW + seconds(30), limit=8)
            assert (len(first.claims), first.skipped) == (6, 1)  # the job's two came first
            assert {c.occurrence.job_id for c in first.claims} <= {o.id for o in others}
            second = await claim(store, NOW + seconds(30), limit=8)
            assert len(second.claims) == 8  # past the kept run, which read alone left 7
            assert [await _state(store, job, t) for t in (10, 20)] == [
                S.SCHEDULED, S.SKIPPED_OVERLAP]

        async def test_occurrence_claim_cancel_previous(self, store: Store) -> None:
            job, running = await _busy(store, Overlap.CANCEL_PREVIOUS, 60)
            now = NOW + seconds(60)
            result = await claim(store, now, worker="w2")
            assert _at(result.claims) == [60]
            assert result.cancelled == [LeaseRef(job.id, NOW, 1)]
            old = await store.occurrence_get(job.id, NOW)
            assert (old.state, old.finished_at, old.lease_until) == (S.CANCELLED, now, None)
            (a,) = await store.attempt_list(job.id, NOW)
            assert a.finished_at == now
            assert a.outcome is not None
            assert await store.occurrence_heartbeat(OccurrenceHeartbeatParams(
                refs=[ref(running)], worker="w1", now=now)) == [ref(running)]
            assert await complete(store, now, completion(running)) == [False]
            assert await _state(store, job, 0) is S.CANCELLED

        async def test_occurrence_claim_cancel_previous_latest_wins(self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.CANCEL_PREVIOUS)
            await add_occurrences(store, job, *(NOW - seconds(t) for t in (30, 20, 10)))
            result = await claim(store, NOW)
            assert (_at(result.claims), result.cancelled) == ([-10], [])
            assert [await _state(store, job, t) for t in (-30, -20)] == [S.CANCELLED] * 2

        async def test_occurrence_claim_allow_all(self, store: Store) -> None:
            job, _ = await _busy(store, Overlap.ALLOW_ALL, 10, 20)
            result = await claim(store, NOW + seconds(20))
            assert (_at(result.claims), result.skipped) == ([10, 20], 0)
            running = await store.occurrence_list(
                OccurrenceListParams(job_id=job.id, states=[S.RUNNING]))
            assert len(running) == 3

    class TestOccurrenceClaimStartedRuns:
        """A run that started is never skipped (G4, G5): rescued after a crash or waiting for
        its backoff, it runs again as its next attempt, and its job's newer occurrences are
        what the overlap policy holds back, even when they are due first."""

        async def test_a_rescued_run_reruns_before_the_backlog(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW)
            await claim_one(store, NOW)
            # The process dies with the run in flight; ticks pile up until it is back.
            await add_occurrences(store, job, *(NOW + seconds(t) for t in range(1, 6)))
            back = NOW + seconds(7)
            (rescued,) = await store.occurrence_rescue(
                OccurrenceRescueParams(now=back, all_but_worker="w2"))
            assert (rescued.state, rescued.attempt) == (S.RETRYING, 1)
            result = await claim(store, back, worker="w2")
            assert [(c.occurrence.scheduled_at, c.occurrence.attempt)
                    for c in result.claims] == [(NOW, 2)]
            assert result.skipped == 5
            assert [await _state(store, job, t) for t in range(1, 6)] == [S.SKIPPED_OVERLAP] * 5
            assert await complete(store, back + seconds(3),
                                  completion(result.claims[0], started_at=back)) == [True]
            occ = await store.occurrence_get(job.id, NOW)
            assert (occ.state, occ.attempt) == (S.SUCCEEDED, 2)
            assert [a.outcome for a in await store.attempt_list(job.id, NOW)] == [
                AttemptOutcome.CRASHED, AttemptOutcome.SUCCEEDED]

        async def test_a_run_in_its_backoff_holds_newer_ones_back(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW)
            first = await claim_one(store, NOW)
            await complete(store, NOW + seconds(1), completion(
                first, state=S.RETRYING, due_at=NOW + seconds(10)))
            await add_occurrences(store, job, NOW + seconds(2), NOW + seconds(4))
            result = await claim(store, NOW + seconds(5))
            assert (result.claims, result.skipped) == ([], 2)
            (again,) = (await claim(store, NOW + seconds(10))).claims
            assert (again.occurrence.scheduled_at, again.occurrence.attempt) == (NOW, 2)

        async def test_buffer_all_waits_for_a_run_in_its_backoff(self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.BUFFER_ALL)
            await add_occurrences(store, job, NOW)
            first = await claim_one(store, NOW)
            await complete(store, NOW + seconds(1), completion(
                first, state=S.RETRYING, due_at=NOW + seconds(10)))
            await add_occurrences(store, job, NOW + seconds(2))
            assert (await claim(store, NOW + seconds(5))).claims == []
            assert await store.occurrence_next_due("default", NOW + seconds(5)) == \
                NOW + seconds(10)
            (again,) = (await claim(store, NOW + seconds(10))).claims
            assert (again.occurrence.scheduled_at, again.occurrence.attempt) == (NOW, 2)
            await complete(store, NOW + seconds(11), completion(again))
            assert _at((await claim(store, NOW + seconds(11))).claims) == [2]

    class TestResults:
        async def test_g7_succeeded_never_runs_again(self, store: Store) -> None:
            job = await add_job(store, "j", next_run_at=NOW, overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, job, NOW)
            c = await claim_one(store, NOW)
            assert await complete(store, NOW + seconds(1), completion(c)) == [True]
            later = NOW + seconds(86400)
            # Nothing any other caller does brings it back.
            await add_occurrences(store, job, NOW, now=later)
            await store.occurrence_insert(OccurrenceInsertParams(
                occurrences=[new_occurrence(job, NOW, trigger=Trigger.MANUAL)], now=later))
            assert await store.job_advance_many(JobAdvanceManyParams(advances=[JobAdvance(
                job_id=job.id, expected_next_run_at=NOW, occurrences=[new_occurrence(job, NOW)],
                next_run_at=later)], now=later)) == 0
            assert await complete(store, later, completion(c, state=S.RETRYING,
                                                           due_at=later)) == [False]
            assert await store.occurrence_release(
                OccurrenceReleaseParams(refs=[ref(c)], worker="w1", now=later)) == 0
            assert await store.occurrence_rescue(
                OccurrenceRescueParams(now=later, all_but_worker="other")) == []
            for worker in ("w1", "w2"):
                assert (await claim(store, later, worker=worker)).claims == []
            occ = await store.occurrence_get(job.id, NOW)
            assert (occ.state, occ.attempt) == (S.SUCCEEDED, 1)
            (a,) = await store.attempt_list(job.id, NOW)
            assert a.outcome is AttemptOutcome.SUCCEEDED


class StoreConformance(JobConformance, OccurrenceConformance, ClaimConformance,
                       KeyConformance, ControlConformance, ChainConformance,
                       BackfillOverlapConformance, VersionConformance):
    """Subclass as ``TestXxxStore`` and define the ``store`` and ``peer_store`` fixtures."""

    async def test_a_migrated_store_has_no_migrations_pending(self, store: Store) -> None:
        assert await store.migrations_pending() == []
