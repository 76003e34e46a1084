"""Store conformance, part two: occurrences after the claim, and reading them back."""

from __future__ import annotations

import pytest

from tickwork.drivers.base import (
    JobSetPausedParams,
    LeaseRef,
    OccurrenceCancelParams,
    OccurrenceHeartbeatParams,
    OccurrenceInsertParams,
    OccurrenceListParams,
    OccurrenceReleaseParams,
    OccurrenceRescueParams,
    Rescued,
    Store,
)
from tickwork.errors import OccurrenceNotFound
from tickwork.models import (
    AttemptOutcome,
    Claim,
    Delivery,
    OccurrenceState,
    Overlap,
    Trigger,
)
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

S = OccurrenceState


async def _heartbeat(
    store: Store, now_in: float, *refs: LeaseRef, worker: str = "w1", extend: float = 30.0
) -> list[LeaseRef]:
    return await store.occurrence_heartbeat(OccurrenceHeartbeatParams(
        refs=refs, worker=worker, now=NOW + seconds(now_in), extend_seconds=extend))


async def _rescue(
    store: Store, now_in: float, *, limit: int = 1000, all_but_worker: str | None = None
) -> list[Rescued]:
    return await store.occurrence_rescue(OccurrenceRescueParams(
        now=NOW + seconds(now_in), limit=limit, all_but_worker=all_but_worker))


async def _running(store: Store, *, max_attempts: int = 3, job_timeout: float = 10.0,
                   delivery: Delivery = Delivery.AT_LEAST_ONCE) -> Claim:
    """One job with one occurrence at NOW, claimed by w1 at NOW (lease until NOW + 35 s)."""
    job = await add_job(store, "j", max_attempts=max_attempts, timeout_seconds=job_timeout,
                        delivery=delivery)
    await add_occurrences(store, job, NOW)
    return await claim_one(store, NOW)


class OccurrenceConformance:
    class TestOccurrenceInsert:
        async def test_occurrence_insert_returns_stored_rows(self, store: Store) -> None:
            job = await add_job(store, "j", queue="q", priority=4, max_attempts=2)
            at = NOW + seconds(0.5)
            (occ,) = await store.occurrence_insert(OccurrenceInsertParams(occurrences=[
                new_occurrence(job, at, due_at=at + seconds(3), trigger=Trigger.MANUAL)],
                now=NOW))
            assert (occ.job_id, occ.scheduled_at, occ.due_at) == (job.id, at, at + seconds(3))
            assert (occ.queue, occ.priority, occ.max_attempts) == ("q", 4, 2)
            assert (occ.state, occ.attempt, occ.trigger) == (S.SCHEDULED, 0, Trigger.MANUAL)
            assert occ.created_at == occ.updated_at == NOW
            assert (occ.lease_until, occ.worker, occ.finished_at, occ.last_error) == (
                None, None, None, None)
            assert occ.idempotency_key == f"{job.id}:manual:2030-01-01T00:00:00.500000Z"
            assert await store.occurrence_get(job.id, at) == occ

        async def test_occurrence_insert_keeps_what_is_stored(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW)
            running = await claim_one(store, NOW)
            again = await add_occurrences(store, job, NOW, NOW + seconds(1),
                                          now=NOW + seconds(5), trigger=Trigger.MANUAL)
            assert [(o.state, o.attempt, o.trigger) for o in again] == [
                (S.RUNNING, 1, Trigger.SCHEDULE), (S.SCHEDULED, 0, Trigger.MANUAL)]
            assert again[0].lease_until == running.occurrence.lease_until

        @pytest.mark.parametrize(("trigger", "infix"), [
            (Trigger.SCHEDULE, ""), (Trigger.MANUAL, "manual:"), (Trigger.BACKFILL, "backfill:"),
        ])
        async def test_occurrence_insert_idempotency_keys(
            self, store: Store, trigger: Trigger, infix: str
        ) -> None:
            job = await add_job(store, "j")
            (occ,) = await add_occurrences(store, job, NOW + seconds(90), trigger=trigger)
            assert occ.idempotency_key == f"{job.id}:{infix}2030-01-01T00:01:30Z"

    class TestOccurrenceGet:
        async def test_occurrence_get_missing_raises(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW)
            for job_id, at in ((job.id, NOW + seconds(1)), ("nope", NOW)):
                with pytest.raises(OccurrenceNotFound):
                    await store.occurrence_get(job_id, at)
                with pytest.raises(LookupError):
                    await store.occurrence_get(job_id, at)

    class TestOccurrenceList:
        @staticmethod
        async def _seed(store: Store) -> list[tuple[int, str]]:
            """Two jobs, five instants each: (offset, job id) in scheduled order."""
            a, b = await add_job(store, "a"), await add_job(store, "b")
            times = [NOW + seconds(10 * i) for i in range(5)]
            await add_occurrences(store, a, *times)
            await add_occurrences(store, b, *times)
            return sorted((10 * i, j.id) for i in range(5) for j in (a, b))

        async def test_occurrence_list_orders_both_ways(self, store: Store) -> None:
            rows = await self._seed(store)
            expected = [(NOW + seconds(o), j) for o, j in rows]
            oldest = await store.occurrence_list(OccurrenceListParams(newest_first=False))
            assert [(o.scheduled_at, o.job_id) for o in oldest] == expected
            newest = await store.occurrence_list(OccurrenceListParams())
            assert [(o.scheduled_at, o.job_id) for o in newest] == expected[::-1]

        @pytest.mark.parametrize("newest_first", [True, False])
        async def test_occurrence_list_cursor_pagination(
            self, store: Store, newest_first: bool
        ) -> None:
            rows = await self._seed(store)
            expected = [(NOW + seconds(o), j) for o, j in rows]
            if newest_first:
                expected.reverse()
            seen: list[tuple[object, str]] = []
            before = None
            while True:
                page = await store.occurrence_list(OccurrenceListParams(
                    before=before, limit=3, newest_first=newest_first))
                assert len(page) <= 3
                if not page:
                    break
                seen += [(o.scheduled_at, o.job_id) for o in page]
                before = (page[-1].scheduled_at, page[-1].job_id)
            assert seen == expected

        @pytest.mark.parametrize("newest_first", [True, False])
        async def test_occurrence_list_pages_through_running_runs(
            self, store: Store, newest_first: bool
        ) -> None:
            """Running runs sit in time order among the others, in every page (PostgreSQL
            reads them apart from the rest: migration 020)."""
            a = await add_job(store, "a", overlap=Overlap.ALLOW_ALL)
            b = await add_job(store, "b", overlap=Overlap.ALLOW_ALL)
            times = [NOW + seconds(10 * i) for i in range(5)]
            await add_occurrences(store, a, *times)
            await add_occurrences(store, b, *times)
            claimed = (await claim(store, NOW + seconds(20), limit=6)).claims
            assert len(claimed) == 6  # the runs at 0, 10 and 20 s
            await complete(store, NOW + seconds(21), *(
                completion(c) for c in claimed if c.occurrence.scheduled_at != times[1]))
            expected = sorted((t, j.id) for t in times for j in (a, b))
            if newest_first:
                expected.reverse()
            states = {(o.scheduled_at, o.job_id): o.state
                      for o in await store.occurrence_list(OccurrenceListParams(limit=20))}
            assert [states[k] for k in sorted(states)] == [
                S.SUCCEEDED] * 2 + [S.RUNNING] * 2 + [S.SUCCEEDED] * 2 + [S.SCHEDULED] * 4
            for size in (1, 3, 4):
                seen: list[tuple[object, str]] = []
                before = None
                while page := await store.occurrence_list(OccurrenceListParams(
                        before=before, limit=size, newest_first=newest_first)):
                    assert len(page) <= size
                    seen += [(o.scheduled_at, o.job_id) for o in page]
                    before = (page[-1].scheduled_at, page[-1].job_id)
                assert seen == expected, size
            running = await store.occurrence_list(OccurrenceListParams(
                states=[S.RUNNING, S.SUCCEEDED], limit=3, newest_first=newest_first))
            assert [o.scheduled_at for o in running] == (
                [times[2], times[2], times[1]] if newest_first else
                [times[0], times[0], times[1]])

        async def test_occurrence_list_filters(self, store: Store) -> None:
            await self._seed(store)
            job_a = (await store.job_get("a")).id
            await claim(store, NOW, limit=1)  # one of the two due now runs
            by_job = await store.occurrence_list(
                OccurrenceListParams(job_id=job_a, newest_first=False))
            assert [o.scheduled_at for o in by_job] == [NOW + seconds(10 * i) for i in range(5)]
            assert {o.job_id for o in by_job} == {job_a}
            running = await store.occurrence_list(OccurrenceListParams(states=[S.RUNNING]))
            assert len(running) == 1
            assert running[0].scheduled_at == NOW
            both = await store.occurrence_list(
                OccurrenceListParams(states=[S.RUNNING, S.SCHEDULED]))
            assert len(both) == 10
            window = await store.occurrence_list(OccurrenceListParams(
                since=NOW + seconds(10), until=NOW + seconds(30), newest_first=False))
            assert [o.scheduled_at for o in window] == [NOW + seconds(t)
                                                        for t in (10, 10, 20, 20)]
            narrowed = await store.occurrence_list(OccurrenceListParams(
                job_id=job_a, states=[S.SCHEDULED], since=NOW + seconds(30)))
            assert [o.scheduled_at for o in narrowed] == [NOW + seconds(40), NOW + seconds(30)]
            assert len(await store.occurrence_list(OccurrenceListParams(limit=4))) == 4
            assert await store.occurrence_list(OccurrenceListParams(job_id="nope")) == []

        async def test_occurrence_list_filters_by_queue(self, store: Store) -> None:
            mail = await add_job(store, "mail", queue="mail")
            other = await add_job(store, "other")
            await add_occurrences(store, mail, NOW, NOW + seconds(10))
            await add_occurrences(store, other, NOW)
            found = await store.occurrence_list(OccurrenceListParams(queue="mail"))
            assert [(o.job_id, o.queue) for o in found] == [(mail.id, "mail")] * 2
            assert await store.occurrence_list(OccurrenceListParams(queue="none")) == []

    class TestOccurrenceNextDue:
        async def test_occurrence_next_due_earliest_waiting(self, store: Store) -> None:
            assert await store.occurrence_next_due("default", NOW) is None
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            other_queue = await add_job(store, "other", queue="q2")
            paused = await add_job(store, "p")
            await add_occurrences(store, other_queue, NOW - seconds(50))
            await add_occurrences(store, paused, NOW - seconds(40))
            await store.job_set_paused(
                JobSetPausedParams(id=paused.id, paused=True, next_run_at=None, now=NOW))
            await add_occurrences(store, job, NOW - seconds(30), NOW + seconds(20),
                                  NOW + seconds(10))
            await claim_one(store, NOW)  # the one 30 s ago now runs
            assert await store.occurrence_next_due("default", NOW) == NOW + seconds(10)
            assert await store.occurrence_next_due("q2", NOW) == NOW - seconds(50)
            assert await store.occurrence_next_due("q3", NOW) is None

    class TestAttemptList:
        async def test_attempt_list_in_number_order(self, store: Store) -> None:
            first = await _running(store)
            assert [r.attempt for r in await _rescue(store, 60)] == [1]
            second = await claim_one(store, NOW + seconds(61), worker="w2")
            assert second.occurrence.attempt == 2
            attempts = await store.attempt_list(first.occurrence.job_id, NOW)
            assert [(a.number, a.worker) for a in attempts] == [(1, "w1"), (2, "w2")]
            assert attempts[0].outcome is AttemptOutcome.CRASHED
            assert attempts[1].outcome is None
            assert await store.attempt_list("nope", NOW) == []

    class TestOccurrenceComplete:
        async def test_occurrence_complete_success(self, store: Store) -> None:
            c = await _running(store)
            started, finished = NOW + seconds(1), NOW + seconds(3)
            assert await complete(store, finished, completion(
                c, started_at=started, finished_at=finished, output="ok")) == [True]
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert (occ.state, occ.attempt, occ.finished_at) == (S.SUCCEEDED, 1, finished)
            assert occ.lease_until is None
            assert occ.last_error is None
            (a,) = await store.attempt_list(occ.job_id, NOW)
            assert (a.started_at, a.finished_at, a.outcome, a.output, a.error) == (
                started, finished, AttemptOutcome.SUCCEEDED, "ok", None)
            assert a.duration_seconds == 2

        async def test_occurrence_complete_terminal_failure(self, store: Store) -> None:
            c = await _running(store)
            assert await complete(store, NOW + seconds(2), completion(
                c, state=S.DEAD, outcome=AttemptOutcome.TIMED_OUT, error="too slow",
                finished_at=NOW + seconds(2))) == [True]
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert (occ.state, occ.finished_at, occ.last_error) == (
                S.DEAD, NOW + seconds(2), "too slow")
            (a,) = await store.attempt_list(occ.job_id, NOW)
            assert (a.outcome, a.error) == (AttemptOutcome.TIMED_OUT, "too slow")

        async def test_occurrence_complete_retry(self, store: Store) -> None:
            c = await _running(store)
            retry_at = NOW + seconds(60)
            assert await complete(store, NOW + seconds(2), completion(
                c, state=S.RETRYING, error="boom", due_at=retry_at)) == [True]
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert (occ.state, occ.due_at, occ.attempt) == (S.RETRYING, retry_at, 1)
            assert occ.finished_at is None
            assert occ.lease_until is None
            assert occ.last_error == "boom"
            assert (await claim(store, retry_at - seconds(1))).claims == []
            again = await claim_one(store, retry_at, worker="w2")
            assert (again.occurrence.attempt, again.occurrence.scheduled_at) == (2, NOW)
            # The claim's occurrence is the stored one, the last error of attempt 1 included.
            assert await store.occurrence_get(occ.job_id, NOW) == again.occurrence
            assert again.occurrence.last_error == "boom"
            (a1, a2) = await store.attempt_list(occ.job_id, NOW)
            assert (a1.outcome, a1.error, a2.queued_at) == (
                AttemptOutcome.FAILED, "boom", retry_at)

        async def test_occurrence_complete_is_fenced(self, store: Store) -> None:
            c = await _running(store)
            assert await complete(store, NOW, completion(c, attempt=2)) == [False]
            assert await complete(store, NOW, completion(c, attempt=0)) == [False]
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert (occ.state, occ.attempt) == (S.RUNNING, 1)
            assert (await store.attempt_list(occ.job_id, NOW))[0].outcome is None
            assert await complete(store, NOW, completion(c)) == [True]
            late = completion(c, state=S.DEAD, error="late")
            assert await complete(store, NOW + seconds(5), late) == [False]
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert (occ.state, occ.last_error) == (S.SUCCEEDED, None)
            (a,) = await store.attempt_list(occ.job_id, NOW)
            assert (a.outcome, a.error) == (AttemptOutcome.SUCCEEDED, None)

        async def test_occurrence_complete_after_rescue_is_rejected(self, store: Store) -> None:
            c = await _running(store)
            await _rescue(store, 60)
            assert await complete(store, NOW + seconds(61), completion(c)) == [False]
            second = await claim_one(store, NOW + seconds(62), worker="w2")
            assert await complete(store, NOW + seconds(63), completion(c)) == [False]
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert (occ.state, occ.attempt, occ.worker) == (S.RUNNING, 2, "w2")
            assert await complete(store, NOW + seconds(63), completion(second)) == [True]

        async def test_occurrence_complete_batch_flags(self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, job, NOW, NOW + seconds(1), NOW + seconds(2))
            c1, c2, c3 = (await claim(store, NOW + seconds(2))).claims
            flags = await complete(store, NOW + seconds(3), completion(c1),
                                   completion(c2, attempt=7), completion(c3, state=S.DEAD),
                                   completion(c1, state=S.DEAD))
            assert flags == [True, False, True, False]
            states = [(await store.occurrence_get(job.id, c.occurrence.scheduled_at)).state
                      for c in (c1, c2, c3)]
            assert states == [S.SUCCEEDED, S.RUNNING, S.DEAD]

    class TestOccurrenceHeartbeat:
        async def test_occurrence_heartbeat_extends_lease(self, store: Store) -> None:
            c = await _running(store)
            assert c.occurrence.lease_until == NOW + seconds(35)
            assert await _heartbeat(store, 20, ref(c), extend=30) == []
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert occ.lease_until == NOW + seconds(50)
            assert await _rescue(store, 49) == []

        async def test_occurrence_heartbeat_never_shortens(self, store: Store) -> None:
            c = await _running(store)
            assert await _heartbeat(store, 1, ref(c), extend=5) == []
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert occ.lease_until == NOW + seconds(35)

        async def test_occurrence_heartbeat_covers_the_timeout(self, store: Store) -> None:
            c = await _running(store, job_timeout=120)
            assert c.occurrence.lease_until == NOW + seconds(125)
            assert await _heartbeat(store, 100, ref(c), extend=30) == []
            lease = (await store.occurrence_get(c.occurrence.job_id, NOW)).lease_until
            assert lease is not None
            assert lease >= NOW + seconds(220)

        async def test_occurrence_heartbeat_reports_lost(self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, job, NOW, NOW + seconds(1), NOW + seconds(2))
            mine, done, other = (await claim(store, NOW + seconds(2))).claims
            await complete(store, NOW + seconds(3), completion(done))
            wrong_attempt = LeaseRef(job.id, NOW, 2)
            unknown = LeaseRef(job.id, NOW + seconds(9), 1)
            lost = await _heartbeat(store, 4, ref(mine), ref(done), wrong_attempt, unknown)
            assert lost == [ref(done), wrong_attempt, unknown]
            assert await _heartbeat(store, 4, ref(other), worker="w2") == [ref(other)]
            lease = (await store.occurrence_get(job.id, NOW + seconds(2))).lease_until
            assert lease == NOW + seconds(37), "a stranger's heartbeat moves nothing"

    class TestOccurrenceRelease:
        async def test_occurrence_release_first_attempt(self, store: Store) -> None:
            c = await _running(store)
            later = NOW + seconds(10)
            n = await store.occurrence_release(
                OccurrenceReleaseParams(refs=[ref(c)], worker="w1", now=later))
            assert n == 1
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert (occ.state, occ.attempt, occ.due_at) == (S.SCHEDULED, 0, later)
            assert occ.lease_until is None
            assert occ.worker is None
            assert await store.attempt_list(occ.job_id, NOW) == []
            assert await _heartbeat(store, 11, ref(c)) == [ref(c)]
            again = await claim_one(store, later, worker="w2")
            assert again.occurrence.attempt == 1

        async def test_occurrence_release_later_attempt(self, store: Store) -> None:
            await _running(store)
            await _rescue(store, 60)
            c = await claim_one(store, NOW + seconds(61))
            assert await store.occurrence_release(OccurrenceReleaseParams(
                refs=[ref(c)], worker="w1", now=NOW + seconds(70))) == 1
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert (occ.state, occ.attempt, occ.due_at) == (S.RETRYING, 1, NOW + seconds(70))
            assert [a.number for a in await store.attempt_list(occ.job_id, NOW)] == [1]

        async def test_occurrence_release_by_another_does_nothing(self, store: Store) -> None:
            c = await _running(store)
            for worker, r in (("w2", ref(c)), ("w1", LeaseRef(c.occurrence.job_id, NOW, 2))):
                assert await store.occurrence_release(OccurrenceReleaseParams(
                    refs=[r], worker=worker, now=NOW + seconds(1))) == 0
            occ = await store.occurrence_get(c.occurrence.job_id, NOW)
            assert occ == c.occurrence
            assert len(await store.attempt_list(occ.job_id, NOW)) == 1

    class TestOccurrenceRescue:
        async def test_occurrence_rescue_only_expired(self, store: Store) -> None:
            c = await _running(store)
            assert await _rescue(store, 34) == []
            (r,) = await _rescue(store, 36)
            assert r == Rescued(c.occurrence.job_id, NOW, 1, "w1", S.RETRYING)
            occ = await store.occurrence_get(r.job_id, NOW)
            assert (occ.state, occ.attempt, occ.due_at) == (S.RETRYING, 1, NOW + seconds(36))
            assert occ.lease_until is None
            assert occ.finished_at is None
            (a,) = await store.attempt_list(r.job_id, NOW)
            assert (a.outcome, a.finished_at) == (AttemptOutcome.CRASHED, NOW + seconds(36))
            assert await _rescue(store, 100) == []
            assert await _heartbeat(store, 37, ref(c)) == [ref(c)]

        async def test_occurrence_rescue_out_of_attempts(self, store: Store) -> None:
            await _running(store, max_attempts=1)
            (r,) = await _rescue(store, 36)
            assert r.state is S.CRASHED
            occ = await store.occurrence_get(r.job_id, NOW)
            assert (occ.state, occ.finished_at) == (S.CRASHED, NOW + seconds(36))
            assert (await claim(store, NOW + seconds(60))).claims == []

        async def test_occurrence_rescue_at_most_once(self, store: Store) -> None:
            await _running(store, max_attempts=5, delivery=Delivery.AT_MOST_ONCE)
            (r,) = await _rescue(store, 36)
            assert r.state is S.CRASHED
            assert (await store.occurrence_get(r.job_id, NOW)).state is S.CRASHED
            (a,) = await store.attempt_list(r.job_id, NOW)
            assert a.outcome is AttemptOutcome.CRASHED
            assert (await claim(store, NOW + seconds(60))).claims == []

        async def test_occurrence_rescue_all_but_worker(self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, job, NOW, NOW + seconds(1))
            (theirs,) = (await claim(store, NOW, worker="old", limit=1)).claims
            (mine,) = (await claim(store, NOW + seconds(1), worker="me")).claims
            assert await _rescue(store, 2) == []
            rescued = await _rescue(store, 2, all_but_worker="me")
            assert [(r.scheduled_at, r.worker) for r in rescued] == [(NOW, "old")]
            occ = await store.occurrence_get(job.id, NOW + seconds(1))
            assert (occ.state, occ.worker) == (S.RUNNING, "me")
            assert theirs.occurrence.worker == "old"
            assert mine.occurrence.lease_until == occ.lease_until

        async def test_occurrence_rescue_limit(self, store: Store) -> None:
            job = await add_job(store, "j", overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, job, *(NOW + seconds(i) for i in range(5)))
            assert len((await claim(store, NOW + seconds(5))).claims) == 5
            assert len(await _rescue(store, 100, limit=2)) == 2
            assert len(await _rescue(store, 100, limit=2)) == 2
            assert len(await _rescue(store, 100, limit=2)) == 1
            assert await _rescue(store, 100) == []

    class TestOccurrenceCancel:
        async def test_occurrence_cancel_waiting(self, store: Store) -> None:
            job = await add_job(store, "j")
            other = await add_job(store, "other")
            await add_occurrences(store, job, NOW, NOW + seconds(10), NOW + seconds(20))
            await add_occurrences(store, other, NOW + seconds(10))
            c = await claim_one(store, NOW)
            await complete(store, NOW, completion(c))
            n = await store.occurrence_cancel(
                OccurrenceCancelParams(job_id=job.id, now=NOW + seconds(1)))
            assert n == 2
            states = [o.state for o in await store.occurrence_list(
                OccurrenceListParams(job_id=job.id, newest_first=False))]
            assert states == [S.SUCCEEDED, S.CANCELLED, S.CANCELLED]
            cancelled = await store.occurrence_get(job.id, NOW + seconds(10))
            assert cancelled.finished_at == NOW + seconds(1)
            assert (await store.occurrence_get(other.id, NOW + seconds(10))).state is S.SCHEDULED
            assert [c.job.id for c in (await claim(store, NOW + seconds(30))).claims] == [
                other.id]
