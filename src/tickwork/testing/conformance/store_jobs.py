"""Store conformance, part one: job definitions and the planner's advance."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from tickwork.drivers.base import (
    JobAdvance,
    JobAdvanceManyParams,
    JobCreateManyParams,
    JobCreateParams,
    JobDeleteParams,
    JobDueParams,
    JobListParams,
    JobSetPausedParams,
    JobUpdateParams,
    LeaseRef,
    OccurrenceHeartbeatParams,
    OccurrenceListParams,
    Store,
)
from tickwork.errors import Conflict, JobNotFound
from tickwork.models import (
    Delivery,
    Job,
    OccurrenceState,
    Overlap,
    RetryPolicy,
    ScheduleSpec,
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
    create_params,
    job_spec,
    new_occurrence,
    seconds,
)

S = OccurrenceState


async def _names(store: Store, p: JobListParams | None = None) -> list[str]:
    return [j.spec.name for j in await store.job_list(p or JobListParams())]


async def _advance(
    store: Store, job: Job, *occurrences: S, at: list[int] | None = None,
    next_run_in: int | None = 120, expected_in: int = 0,
) -> int:
    """Advance ``job`` from NOW + expected_in: one occurrence per offset in ``at``."""
    offsets = at if at is not None else [0]
    states = list(occurrences) or [S.SCHEDULED] * len(offsets)
    return await store.job_advance_many(JobAdvanceManyParams(advances=[JobAdvance(
        job_id=job.id, expected_next_run_at=NOW + seconds(expected_in),
        occurrences=[new_occurrence(job, NOW + seconds(o), state=st)
                     for o, st in zip(offsets, states, strict=True)],
        next_run_at=None if next_run_in is None else NOW + seconds(next_run_in),
    )], now=NOW))


class JobConformance:
    class TestMigrate:
        async def test_migrate_twice_is_harmless(self, store: Store) -> None:
            job = await add_job(store, "kept")
            await store.migrate()
            assert await store.job_get(job.id) == job

    class TestJobCreate:
        async def test_job_create_round_trips_every_field(self, store: Store) -> None:
            spec = replace(
                job_spec("nightly-report", queue="reports", priority=7, kind="python",
                         payload={"callable": "pkg.mod:fn", "args": [1, "two"],
                                  "kwargs": {"nested": {"x": [True, None, 1.5]}}},
                         timeout_seconds=90.5, overlap=Overlap.BUFFER_ALL,
                         catchup_window_seconds=600, tags=("a", "b"),
                         delivery=Delivery.AT_MOST_ONCE),
                schedule=ScheduleSpec(type="cron", cron="0 3 * * *", timezone="Europe/Berlin",
                                      start_at=NOW, end_at=NOW + seconds(86400),
                                      jitter_seconds=5),
                retry=RetryPolicy(max_attempts=5, backoff_base_seconds=1.5,
                                  backoff_max_seconds=60, jitter="equal"),
            )
            next_run = NOW + seconds(3600.25)
            job = await store.job_create(create_params(spec, next_run_at=next_run))
            assert job.id
            assert job.spec == spec
            assert job.next_run_at == next_run
            assert job.created_at == job.updated_at == NOW
            assert await store.job_get(job.id) == job

        async def test_job_create_with_explicit_id(self, store: Store) -> None:
            job = await store.job_create(create_params(job_spec("a"), id="my-id"))
            assert job.id == "my-id"
            assert (await store.job_get("my-id")).spec.name == "a"

        async def test_job_create_gives_distinct_ids(self, store: Store) -> None:
            a, b = await add_job(store, "a"), await add_job(store, "b")
            assert a.id != b.id

        async def test_job_create_without_next_run(self, store: Store) -> None:
            job = await add_job(store, "a", next_run_at=None)
            assert (await store.job_get(job.id)).next_run_at is None

        async def test_job_create_duplicate_name_conflicts(self, store: Store) -> None:
            first = await add_job(store, "dup")
            with pytest.raises(Conflict, match="dup"):
                await add_job(store, "dup", queue="other")
            assert await store.job_list(JobListParams()) == [first]

    class TestJobCreateMany:
        async def test_job_create_many_thousand_in_one_call(self, store: Store) -> None:
            names = [f"job-{i:04d}" for i in range(1000)]
            jobs = await store.job_create_many(JobCreateManyParams(jobs=[
                create_params(job_spec(n), next_run_at=NOW + seconds(i))
                for i, n in enumerate(names)]))
            assert [j.spec.name for j in jobs] == names
            assert len({j.id for j in jobs}) == 1000
            assert jobs[999].next_run_at == NOW + seconds(999)
            assert await _names(store, JobListParams(limit=1000)) == names

        async def test_job_create_many_empty(self, store: Store) -> None:
            assert await store.job_create_many(JobCreateManyParams(jobs=[])) == []
            assert await store.job_create_many(JobCreateManyParams(jobs=iter([]))) == []

        async def test_job_create_many_takes_jobs_as_they_are_produced(
            self, store: Store
        ) -> None:
            names = [f"made-{i:04d}" for i in range(2500)]
            jobs = await store.job_create_many(JobCreateManyParams(
                jobs=(create_params(job_spec(n)) for n in names)))
            assert [j.spec.name for j in jobs] == names
            assert await store.job_get("made-2499") == jobs[-1]

        async def test_job_create_many_error_while_producing_stores_nothing(
            self, store: Store
        ) -> None:
            def produce() -> Iterator[JobCreateParams]:
                for i in range(2500):  # more than a driver takes at once: some are written
                    yield create_params(job_spec(f"made-{i:04d}"))
                raise ValueError("the 2501st document is bad")

            with pytest.raises(ValueError, match="2501st"):
                await store.job_create_many(JobCreateManyParams(jobs=produce()))
            assert await _names(store) == []
            # and the store is usable again
            assert len(await store.job_create_many(JobCreateManyParams(
                jobs=[create_params(job_spec("after"))]))) == 1

        async def test_job_create_many_duplicate_in_batch_stores_nothing(
            self, store: Store
        ) -> None:
            batch = [create_params(job_spec(n)) for n in ("x", "twin", "y", "twin", "z")]
            with pytest.raises(Conflict, match="twin"):
                await store.job_create_many(JobCreateManyParams(jobs=batch))
            assert await _names(store) == []

        async def test_job_create_many_clash_with_stored_stores_nothing(
            self, store: Store
        ) -> None:
            await add_job(store, "taken")
            batch = [create_params(job_spec(n)) for n in ("a", "b", "taken", "c")]
            with pytest.raises(Conflict, match="taken"):
                await store.job_create_many(JobCreateManyParams(jobs=batch))
            assert await _names(store) == ["taken"]

    class TestJobGet:
        async def test_job_get_by_id_and_by_name(self, store: Store) -> None:
            job = await add_job(store, "by-name")
            assert await store.job_get(job.id) == job
            assert await store.job_get("by-name") == job

        async def test_job_get_missing_raises(self, store: Store) -> None:
            with pytest.raises(JobNotFound):
                await store.job_get("nope")
            with pytest.raises(LookupError):
                await store.job_get("nope")

    class TestJobList:
        @staticmethod
        async def _seed(store: Store) -> None:
            await add_job(store, "alpha-mail", queue="mail", kind="email", tags=["x", "y"])
            await add_job(store, "beta-http", tags=["y"])
            await add_job(store, "gamma-shell", kind="shell", paused=True)
            await add_job(store, "delta-mail", queue="mail", kind="email", tags=["x"])

        async def test_job_list_sorted_by_name(self, store: Store) -> None:
            await self._seed(store)
            assert await _names(store) == ["alpha-mail", "beta-http", "delta-mail",
                                            "gamma-shell"]

        @pytest.mark.parametrize(("params", "expected"), [
            (JobListParams(queue="mail"), ["alpha-mail", "delta-mail"]),
            (JobListParams(queue="none"), []),
            (JobListParams(tag="x"), ["alpha-mail", "delta-mail"]),
            (JobListParams(tag="y"), ["alpha-mail", "beta-http"]),
            (JobListParams(tag="z"), []),
            (JobListParams(kind="shell"), ["gamma-shell"]),
            (JobListParams(name_contains="mail"), ["alpha-mail", "delta-mail"]),
            (JobListParams(name_contains="http"), ["beta-http"]),
            (JobListParams(paused=True), ["gamma-shell"]),
            (JobListParams(paused=False), ["alpha-mail", "beta-http", "delta-mail"]),
            (JobListParams(queue="mail", tag="y"), ["alpha-mail"]),
            (JobListParams(kind="email", name_contains="delta"), ["delta-mail"]),
        ])
        async def test_job_list_filters(
            self, store: Store, params: JobListParams, expected: list[str]
        ) -> None:
            await self._seed(store)
            assert await _names(store, params) == expected

        async def test_job_list_cursor_pagination(self, store: Store) -> None:
            names = [f"j{i:02d}" for i in range(25)]
            for n in reversed(names):
                await add_job(store, n)
            seen: list[str] = []
            after: str | None = None
            while True:
                page = await _names(store, JobListParams(after_name=after, limit=10))
                assert len(page) <= 10
                if not page:
                    break
                seen += page
                after = page[-1]
            assert seen == names
            assert await _names(store, JobListParams(after_name="j22")) == ["j23", "j24"]

        async def test_job_list_hides_deleted(self, store: Store) -> None:
            a = await add_job(store, "a")
            await add_job(store, "b")
            await store.job_delete(JobDeleteParams(id=a.id, now=NOW))
            assert await _names(store) == ["b"]

    class TestJobUpdate:
        async def test_job_update_changes_name_and_spec(self, store: Store) -> None:
            job = await add_job(store, "old", next_run_at=NOW)
            later = NOW + seconds(10)
            spec = job_spec("new", queue="q2", priority=3, tags=["t"])
            updated = await store.job_update(JobUpdateParams(
                id=job.id, spec=spec, next_run_at=NOW + seconds(60), now=later))
            assert updated.id == job.id
            assert updated.spec == spec
            assert updated.next_run_at == NOW + seconds(60)
            assert updated.created_at == NOW
            assert updated.updated_at == later
            assert await store.job_get("new") == updated
            with pytest.raises(JobNotFound):
                await store.job_get("old")
            assert await _names(store, JobListParams(queue="q2")) == ["new"]

        async def test_job_update_keeping_its_own_name(self, store: Store) -> None:
            job = await add_job(store, "same")
            updated = await store.job_update(JobUpdateParams(
                id=job.id, spec=job_spec("same", priority=9), next_run_at=None, now=NOW))
            assert updated.spec.priority == 9

        async def test_job_update_to_taken_name_conflicts(self, store: Store) -> None:
            await add_job(store, "taken")
            job = await add_job(store, "mine")
            with pytest.raises(Conflict, match="taken"):
                await store.job_update(JobUpdateParams(
                    id=job.id, spec=job_spec("taken", priority=5), next_run_at=None, now=NOW))
            assert await store.job_get(job.id) == job

        async def test_job_update_missing_or_deleted_raises(self, store: Store) -> None:
            job = await add_job(store, "gone")
            await store.job_delete(JobDeleteParams(id=job.id, now=NOW))
            for ref in ("nope", job.id):
                with pytest.raises(JobNotFound):
                    await store.job_update(JobUpdateParams(
                        id=ref, spec=job_spec("gone"), next_run_at=None, now=NOW))

        @pytest.mark.parametrize("replan", [True, False])
        async def test_a_new_schedule_removes_the_runs_planned_from_the_old_one(
                self, store: Store, replan: bool) -> None:
            """Only the old schedule's runs not due yet: not one already due, started, or
            triggered otherwise; and none without ``replan`` (the schedule unchanged)."""
            job = await add_job(store, "moved", next_run_at=NOW + seconds(120),
                                overlap=Overlap.ALLOW_ALL)
            await add_occurrences(store, job, NOW - seconds(5), NOW + seconds(1),
                                  NOW + seconds(30), NOW + seconds(60))
            await add_occurrences(store, job, NOW + seconds(45), trigger=Trigger.MANUAL)
            (started,) = (await claim(store, NOW + seconds(1), limit=1)).claims
            assert started.occurrence.scheduled_at == NOW - seconds(5)
            await store.job_update(JobUpdateParams(  # NOW + 1 is due: it stays, unstarted
                id=job.id, spec=job_spec("moved", overlap=Overlap.ALLOW_ALL,
                                         schedule=ScheduleSpec(type="every", every_seconds=90.0)),
                next_run_at=NOW + seconds(90), now=NOW + seconds(2), replan=replan))
            left = {(o.scheduled_at, o.trigger) for o in await store.occurrence_list(
                OccurrenceListParams(job_id=job.id))}
            kept = {(NOW - seconds(5), Trigger.SCHEDULE), (NOW + seconds(1), Trigger.SCHEDULE),
                    (NOW + seconds(45), Trigger.MANUAL)}
            planned = {(NOW + seconds(30), Trigger.SCHEDULE),
                       (NOW + seconds(60), Trigger.SCHEDULE)}
            assert left == (kept if replan else kept | planned)

    class TestJobSetPaused:
        async def test_job_set_paused_pauses_and_resumes(self, store: Store) -> None:
            job = await add_job(store, "p", next_run_at=NOW)
            paused = await store.job_set_paused(JobSetPausedParams(
                id=job.id, paused=True, next_run_at=NOW, now=NOW + seconds(1)))
            assert paused.spec.paused
            assert paused.updated_at == NOW + seconds(1)
            assert (await store.job_get(job.id)).spec.paused
            assert await _names(store, JobListParams(paused=True)) == ["p"]
            assert await store.job_due(JobDueParams(until=NOW + seconds(3600))) == []

            resumed = await store.job_set_paused(JobSetPausedParams(
                id=job.id, paused=False, next_run_at=NOW + seconds(300), now=NOW + seconds(2)))
            assert not resumed.spec.paused
            assert resumed.next_run_at == NOW + seconds(300)
            assert resumed.spec == job.spec
            assert [j.id for j in await store.job_due(JobDueParams(until=NOW + seconds(300)))
                    ] == [job.id]

        async def test_job_set_paused_missing_raises(self, store: Store) -> None:
            with pytest.raises(JobNotFound):
                await store.job_set_paused(
                    JobSetPausedParams(id="nope", paused=True, next_run_at=None, now=NOW))

    class TestJobDelete:
        async def test_job_delete_hides_the_job(self, store: Store) -> None:
            job = await add_job(store, "doomed", next_run_at=NOW)
            await store.job_delete(JobDeleteParams(id=job.id, now=NOW))
            for ref in (job.id, "doomed"):
                with pytest.raises(JobNotFound):
                    await store.job_get(ref)
            assert await store.job_list(JobListParams()) == []
            assert await store.job_due(JobDueParams(until=NOW + seconds(3600))) == []
            with pytest.raises(JobNotFound):
                await store.job_delete(JobDeleteParams(id=job.id, now=NOW))

        async def test_job_delete_missing_raises(self, store: Store) -> None:
            with pytest.raises(JobNotFound):
                await store.job_delete(JobDeleteParams(id="nope", now=NOW))

        async def test_job_delete_cancels_waiting_and_running(self, store: Store) -> None:
            job = await add_job(store, "doomed", overlap=Overlap.ALLOW_ALL)
            other = await add_job(store, "other")
            t0, t1, t2, t3 = (NOW + seconds(i) for i in range(4))
            await add_occurrences(store, job, t0, t1, t2, t3)
            await add_occurrences(store, other, t3)
            done = await claim_one(store, t0)
            assert await complete(store, t0, completion(done, started_at=t0)) == [True]
            running = await claim_one(store, t1)
            later = NOW + seconds(30)
            await store.job_delete(JobDeleteParams(id=job.id, now=later))

            occs = {o.scheduled_at: o for o in await store.occurrence_list(
                OccurrenceListParams(job_id=job.id))}
            assert occs[t0].state is S.SUCCEEDED
            for t in (t1, t2, t3):
                assert occs[t].state is S.CANCELLED
                assert occs[t].finished_at == later
            (attempt,) = await store.attempt_list(job.id, t1)
            assert attempt.finished_at == later, "the running attempt is closed"
            lost = await store.occurrence_heartbeat(OccurrenceHeartbeatParams(
                refs=[LeaseRef(job.id, t1, 1)], worker="w1", now=later))
            assert lost == [LeaseRef(job.id, t1, 1)]
            assert running.occurrence.scheduled_at == t1
            assert (await store.occurrence_get(other.id, t3)).state is S.SCHEDULED
            result = await claim(store, later)
            assert [c.job.id for c in result.claims] == [other.id]

        async def test_job_delete_frees_the_name(self, store: Store) -> None:
            old = await add_job(store, "reused")
            await add_occurrences(store, old, NOW)
            await store.job_delete(JobDeleteParams(id=old.id, now=NOW))
            new = await add_job(store, "reused", queue="q")
            assert new.id != old.id
            assert await store.job_get("reused") == new
            # The history of the deleted job stays readable.
            assert (await store.occurrence_get(old.id, NOW)).state is S.CANCELLED

    class TestJobDue:
        async def test_job_due_orders_by_next_run_and_limits(self, store: Store) -> None:
            for name, offset in (("c", 30), ("a", 10), ("late", 61), ("b", 20), ("d", 60)):
                await add_job(store, name, next_run_at=NOW + seconds(offset))
            await add_job(store, "never", next_run_at=None)
            due = await store.job_due(JobDueParams(until=NOW + seconds(60)))
            assert [j.spec.name for j in due] == ["a", "b", "c", "d"]
            due = await store.job_due(JobDueParams(until=NOW + seconds(60), limit=2))
            assert [j.spec.name for j in due] == ["a", "b"]

        async def test_job_due_skips_paused_and_deleted(self, store: Store) -> None:
            await add_job(store, "paused", next_run_at=NOW, paused=True)
            gone = await add_job(store, "gone", next_run_at=NOW)
            await store.job_delete(JobDeleteParams(id=gone.id, now=NOW))
            live = await add_job(store, "live", next_run_at=NOW)
            assert await store.job_due(JobDueParams(until=NOW)) == [live]

    class TestJobAdvanceMany:
        async def test_job_advance_many_inserts_and_moves_on(self, store: Store) -> None:
            job = await add_job(store, "a", next_run_at=NOW)
            assert await _advance(store, job, at=[0, 60]) == 2
            assert (await store.job_get(job.id)).next_run_at == NOW + seconds(120)
            occs = await store.occurrence_list(
                OccurrenceListParams(job_id=job.id, newest_first=False))
            assert [(o.scheduled_at, o.state, o.attempt) for o in occs] == [
                (NOW, S.SCHEDULED, 0), (NOW + seconds(60), S.SCHEDULED, 0)]
            assert occs[0].created_at == NOW
            assert occs[0].max_attempts == 3
            assert occs[0].finished_at is None

        async def test_job_advance_many_stale_expectation_does_nothing(
            self, store: Store
        ) -> None:
            job = await add_job(store, "a", next_run_at=NOW)
            assert await _advance(store, job, at=[0]) == 1
            # A second planner read the job before the first moved it on.
            assert await _advance(store, job, at=[0, 60], next_run_in=180) == 0
            assert (await store.job_get(job.id)).next_run_at == NOW + seconds(120)
            occs = await store.occurrence_list(OccurrenceListParams(job_id=job.id))
            assert [o.scheduled_at for o in occs] == [NOW]

        async def test_job_advance_many_is_insert_if_absent(self, store: Store) -> None:
            job = await add_job(store, "a", next_run_at=NOW)
            await add_occurrences(store, job, NOW)
            await claim_one(store, NOW)
            assert await _advance(store, job, at=[0, 60]) == 1
            assert await _advance(store, job, at=[60], expected_in=120, next_run_in=180) == 0
            occs = await store.occurrence_list(
                OccurrenceListParams(job_id=job.id, newest_first=False))
            assert [(o.state, o.attempt) for o in occs] == [(S.RUNNING, 1), (S.SCHEDULED, 0)]
            assert (await store.job_get(job.id)).next_run_at == NOW + seconds(180)

        async def test_job_advance_many_inserts_missed_as_finished(self, store: Store) -> None:
            job = await add_job(store, "a", next_run_at=NOW)
            assert await _advance(store, job, S.MISSED, S.SCHEDULED, at=[0, 60]) == 2
            missed = await store.occurrence_get(job.id, NOW)
            assert missed.state is S.MISSED
            assert missed.finished_at == NOW
            assert (await claim(store, NOW + seconds(60))).claims[0].occurrence.scheduled_at \
                == NOW + seconds(60)

        async def test_job_advance_many_to_the_end_of_schedule(self, store: Store) -> None:
            job = await add_job(store, "once", next_run_at=NOW)
            assert await _advance(store, job, at=[0], next_run_in=None) == 1
            assert (await store.job_get(job.id)).next_run_at is None
            assert await store.job_due(JobDueParams(until=NOW + seconds(10**6))) == []

        async def test_job_advance_many_skips_paused_and_deleted(self, store: Store) -> None:
            paused = await add_job(store, "p", next_run_at=NOW, paused=True)
            gone = await add_job(store, "g", next_run_at=NOW)
            await store.job_delete(JobDeleteParams(id=gone.id, now=NOW))
            for job in (paused, gone):
                assert await _advance(store, job, at=[0]) == 0
                assert await store.occurrence_list(OccurrenceListParams(job_id=job.id)) == []
            assert (await store.job_get(paused.id)).next_run_at == NOW

        async def test_job_advance_many_applies_each_advance_alone(self, store: Store) -> None:
            a = await add_job(store, "a", next_run_at=NOW)
            b = await add_job(store, "b", next_run_at=NOW + seconds(5))
            inserted = await store.job_advance_many(JobAdvanceManyParams(advances=[
                JobAdvance(job_id=a.id, expected_next_run_at=NOW,
                           occurrences=[new_occurrence(a, NOW)], next_run_at=NOW + seconds(60)),
                JobAdvance(job_id=b.id, expected_next_run_at=NOW,  # stale
                           occurrences=[new_occurrence(b, NOW)], next_run_at=NOW + seconds(60)),
            ], now=NOW))
            assert inserted == 1
            assert (await store.job_get(a.id)).next_run_at == NOW + seconds(60)
            assert (await store.job_get(b.id)).next_run_at == NOW + seconds(5)
            assert await store.occurrence_list(OccurrenceListParams(job_id=b.id)) == []
