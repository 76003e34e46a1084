"""Store conformance, part four: run control (cancel and retry one run) and the audit trail."""

from __future__ import annotations

import pytest

from tickwork.drivers.base import (
    AttemptNoteParams,
    AuditListParams,
    JobDeleteParams,
    JobSetPausedParams,
    JobUpdateParams,
    OccurrenceCancelOneParams,
    OccurrenceClaimKeysParams,
    OccurrenceHeartbeatParams,
    OccurrenceRetryParams,
    Store,
)
from tickwork.errors import Conflict, JobNotFound, OccurrenceNotFound
from tickwork.models import AttemptOutcome, AuditAction, Job, OccurrenceState, Overlap
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim,
    claim_one,
    complete,
    completion,
    create_params,
    job_spec,
    ref,
    seconds,
)

S = OccurrenceState


async def _cancel(store: Store, job: Job, at: float = 0, now: float = 1,
                  actor: str | None = "alice") -> S:
    occ = await store.occurrence_cancel_one(OccurrenceCancelOneParams(
        job_id=job.id, scheduled_at=NOW + seconds(at), now=NOW + seconds(now), actor=actor))
    return occ.state


async def _retry(store: Store, job: Job, at: float = 0, now: float = 10,
                 actor: str | None = "bob") -> tuple[S, int]:
    occ = await store.occurrence_retry(OccurrenceRetryParams(
        job_id=job.id, scheduled_at=NOW + seconds(at), now=NOW + seconds(now), actor=actor))
    return occ.state, occ.attempt


async def _dead(store: Store, overlap: Overlap = Overlap.SKIP) -> Job:
    """A job whose occurrence at NOW ran once and ended dead (max_attempts 1)."""
    job = await add_job(store, "j", max_attempts=1, overlap=overlap)
    await add_occurrences(store, job, NOW)
    c = await claim_one(store, NOW)
    await complete(store, NOW + seconds(1), completion(c, state=S.DEAD, error="boom"))
    return job


class ControlConformance:
    class TestCancelOne:
        async def test_cancels_a_waiting_run_and_names_who(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW, NOW + seconds(60))
            assert await _cancel(store, job) is S.CANCELLED
            occ = await store.occurrence_get(job.id, NOW)
            assert occ.last_error == "cancelled by alice"
            assert occ.finished_at == NOW + seconds(1)
            # only that run: the other still waits, and a claim skips the cancelled one
            assert (await store.occurrence_get(job.id, NOW + seconds(60))).state is S.SCHEDULED
            assert (await claim(store, NOW + seconds(2))).claims == []

        async def test_a_running_attempt_ends_and_its_worker_loses_the_lease(
                self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW)
            c = await claim_one(store, NOW)
            assert await _cancel(store, job) is S.CANCELLED
            (a,) = await store.attempt_list(job.id, NOW)
            assert a.outcome is AttemptOutcome.FAILED
            assert a.error == "cancelled by alice"
            lost = await store.occurrence_heartbeat(OccurrenceHeartbeatParams(
                refs=[ref(c)], worker="w1", now=NOW + seconds(2)))
            assert lost == [ref(c)]
            # the late result is fenced off: the run stays cancelled
            assert await complete(store, NOW + seconds(3), completion(c)) == [False]
            assert (await store.occurrence_get(job.id, NOW)).state is S.CANCELLED

        async def test_a_note_goes_on_the_ended_attempt_and_its_run(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW)
            c = await claim_one(store, NOW)
            note = AttemptNoteParams(ref=ref(c), note="it ran on")
            assert await store.attempt_note(note) is False  # running: nothing to note yet
            assert await _cancel(store, job) is S.CANCELLED
            assert await store.attempt_note(note) is True
            (a,) = await store.attempt_list(job.id, NOW)
            assert a.error == "cancelled by alice; it ran on"
            assert (await store.occurrence_get(job.id, NOW)).last_error == (
                "cancelled by alice; it ran on")
            other = AttemptNoteParams(ref=ref(c).__class__(job.id, NOW, 2), note="x")
            assert await store.attempt_note(other) is False  # no such attempt

        async def test_an_ended_run_is_a_conflict(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW)
            c = await claim_one(store, NOW)
            await complete(store, NOW + seconds(1), completion(c))
            with pytest.raises(Conflict):
                await _cancel(store, job)
            assert (await store.occurrence_get(job.id, NOW)).state is S.SUCCEEDED

        async def test_an_unknown_run_is_not_found(self, store: Store) -> None:
            job = await add_job(store, "j")
            with pytest.raises(OccurrenceNotFound):
                await _cancel(store, job)

    class TestRetry:
        async def test_a_dead_run_runs_again_as_its_next_attempt(self, store: Store) -> None:
            job = await _dead(store)
            assert await _retry(store, job) == (S.RETRYING, 1)
            occ = await store.occurrence_get(job.id, NOW)
            assert occ.due_at == NOW + seconds(10)
            assert occ.finished_at is None
            (c,) = (await claim(store, NOW + seconds(10))).claims
            assert c.occurrence.attempt == 2
            assert c.occurrence.idempotency_key == occ.idempotency_key
            assert [a.number for a in await store.attempt_list(job.id, NOW)] == [1, 2]

        async def test_not_due_before_now(self, store: Store) -> None:
            job = await _dead(store)
            await _retry(store, job, now=10)
            assert (await claim(store, NOW + seconds(9))).claims == []

        async def test_a_run_cancelled_before_it_started_is_neither_missed_nor_skipped(
                self, store: Store) -> None:
            # past the catch-up window, with a newer run of the same skip job running
            job = await add_job(store, "j", catchup_window_seconds=60)
            await add_occurrences(store, job, NOW)
            await _cancel(store, job, now=1)
            await add_occurrences(store, job, NOW + seconds(500))
            await claim_one(store, NOW + seconds(500))  # the newer run is running
            assert await _retry(store, job, now=600) == (S.RETRYING, 0)
            assert (await claim(store, NOW + seconds(600))).claims == []  # waits, not skipped
            assert (await store.occurrence_get(job.id, NOW)).state is S.RETRYING
            await complete(store, NOW + seconds(601), completion(
                ref(await store.occurrence_get(job.id, NOW + seconds(500)))))
            (c,) = (await claim(store, NOW + seconds(602))).claims
            assert (c.occurrence.scheduled_at, c.occurrence.attempt) == (NOW, 1)

        @pytest.mark.parametrize("overlap", list(Overlap))
        async def test_whatever_the_overlap_policy(self, store: Store, overlap: Overlap) -> None:
            job = await _dead(store, overlap)
            await _retry(store, job)
            (c,) = (await claim(store, NOW + seconds(10))).claims
            assert c.occurrence.attempt == 2

        async def test_claimed_by_key_as_a_dispatch_delivers_it(self, store: Store) -> None:
            job = await _dead(store)
            await _retry(store, job)
            result = await store.occurrence_claim_keys(OccurrenceClaimKeysParams(
                keys=[(job.id, NOW)], worker="w2", now=NOW + seconds(10)))
            assert [cl.occurrence.attempt for cl in result.claims] == [2]

        async def test_crashed_and_cancelled_runs_too(self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW, NOW + seconds(1))
            c = await claim_one(store, NOW)
            await complete(store, NOW + seconds(1), completion(c, state=S.CRASHED))
            await _cancel(store, job, at=1, now=2)
            assert (await _retry(store, job, at=0))[0] is S.RETRYING
            assert (await _retry(store, job, at=1))[0] is S.RETRYING

        async def test_a_waiting_running_or_succeeded_run_is_a_conflict(
                self, store: Store) -> None:
            job = await add_job(store, "j")
            await add_occurrences(store, job, NOW, NOW + seconds(1))
            with pytest.raises(Conflict):
                await _retry(store, job, at=1)
            c = await claim_one(store, NOW)
            with pytest.raises(Conflict):
                await _retry(store, job)
            await complete(store, NOW + seconds(1), completion(c))
            with pytest.raises(Conflict):
                await _retry(store, job)

        async def test_a_deleted_jobs_run_is_not_retried(self, store: Store) -> None:
            job = await _dead(store)
            await store.job_delete(JobDeleteParams(id=job.id, now=NOW + seconds(2)))
            with pytest.raises(JobNotFound):
                await _retry(store, job)

    class TestAudit:
        async def test_every_change_is_recorded_with_who(self, store: Store) -> None:
            spec = job_spec("a")
            job = await store.job_create(create_params(spec).__class__(
                spec=spec, next_run_at=None, now=NOW, actor="carol"))
            assert (job.created_by, job.updated_by) == ("carol", "carol")
            assert (await store.job_get(job.id)).created_by == "carol"
            changed = await store.job_update(JobUpdateParams(
                id=job.id, spec=job_spec("a", priority=5), next_run_at=None,
                now=NOW + seconds(1), actor="dave",
                diff={"priority": {"before": 0, "after": 5}}))
            assert (changed.created_by, changed.updated_by) == ("carol", "dave")
            paused = await store.job_set_paused(JobSetPausedParams(
                id=job.id, paused=True, next_run_at=None, now=NOW + seconds(2), actor="erin"))
            assert paused.updated_by == "erin"
            await store.job_set_paused(JobSetPausedParams(
                id=job.id, paused=False, next_run_at=None, now=NOW + seconds(3), actor="erin"))
            await add_occurrences(store, job, NOW + seconds(4))
            await _cancel(store, job, at=4, now=5, actor="frank")
            await _retry(store, job, at=4, now=6, actor="grace")
            await store.job_delete(JobDeleteParams(id=job.id, now=NOW + seconds(7), actor="h"))
            entries = await store.audit_list(AuditListParams(job_id=job.id))
            assert [(e.action, e.actor) for e in entries] == [
                (AuditAction.CREATE, "carol"), (AuditAction.UPDATE, "dave"),
                (AuditAction.PAUSE, "erin"), (AuditAction.RESUME, "erin"),
                (AuditAction.CANCEL, "frank"), (AuditAction.RETRY, "grace"),
                (AuditAction.DELETE, "h")]
            assert entries[1].details == {"priority": {"before": 0, "after": 5}}
            assert entries[4].scheduled_at == NOW + seconds(4)
            assert {e.job_name for e in entries} == {"a"}
            assert entries[0].at == NOW

        async def test_listing_by_time_and_cursor(self, store: Store) -> None:
            for i in range(3):
                await add_job(store, f"j{i}", now=NOW + seconds(i))
            since = await store.audit_list(AuditListParams(since=NOW + seconds(1)))
            assert [e.job_name for e in since] == ["j1", "j2"]
            page = await store.audit_list(AuditListParams(after_id=since[0].id, limit=5))
            assert [e.job_name for e in page] == ["j2"]

        async def test_bulk_creation_records_each_job(self, store: Store) -> None:
            from tickwork.drivers.base import JobCreateManyParams  # noqa: PLC0415  (local to this test)

            jobs = await store.job_create_many(JobCreateManyParams(jobs=[
                create_params(job_spec(f"b{i}")) for i in range(3)]))
            entries = await store.audit_list(AuditListParams())
            created = sorted(str(e.job_id) for e in entries if e.action is AuditAction.CREATE)
            assert created == sorted(j.id for j in jobs)

    class TestDeletedJobs:
        async def test_found_by_id_and_name(self, store: Store) -> None:
            job = await add_job(store, "gone")
            assert await store.job_get_deleted("gone") == []
            await store.job_delete(JobDeleteParams(id=job.id, now=NOW + seconds(1)))
            again = await add_job(store, "gone")
            await store.job_delete(JobDeleteParams(id=again.id, now=NOW + seconds(2)))
            assert [j.id for j in await store.job_get_deleted("gone")] == [again.id, job.id]
            assert [j.id for j in await store.job_get_deleted(job.id)] == [job.id]
