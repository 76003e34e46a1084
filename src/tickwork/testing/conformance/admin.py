"""The AdminStore conformance suite: every driver passes it (STYLE habit 2).

A driver's test module subclasses ``AdminConformance`` and defines ``store`` (a fresh,
migrated Store of its own); the suite reaches the admin driver through ``store.admin()``,
as the API does.

Tests build their instants from ``factories.NOW``; none reads a clock or sleeps.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from tickwork.drivers.admin import (
    AdminStore,
    JobStatusParams,
    QueueInfo,
    QueueListParams,
    QueueSetPausedParams,
    Scope,
    StatsParams,
    TokenAuthenticateParams,
    TokenCreateParams,
    TokenInfo,
    TokenNotFound,
    TokenRevokeParams,
)
from tickwork.drivers.base import JobDeleteParams, Store
from tickwork.errors import Conflict
from tickwork.models import AttemptOutcome, Job, OccurrenceState, Trigger
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
    seconds,
)

__all__ = ["AdminConformance"]

S = OccurrenceState


async def _queues(admin: AdminStore, now: datetime = NOW) -> list[QueueInfo]:
    return await admin.queue_list(QueueListParams(now=now))


async def _set_paused(admin: AdminStore, name: str, paused: bool,
                      now: datetime = NOW) -> QueueInfo:
    return await admin.queue_set_paused(QueueSetPausedParams(name=name, paused=paused, now=now))


async def _token(admin: AdminStore, name: str, token_hash: str, *, id: str | None = None,
                 scope: Scope = Scope.READ, now: datetime = NOW) -> TokenInfo:
    return await admin.token_create(TokenCreateParams(
        id=id or f"tok_{name}_{token_hash}", name=name, scope=scope, token_hash=token_hash,
        now=now))


async def _history(store: Store) -> Job:
    """Job "a" with three finished runs and one waiting; job "b" paused.

    NOW (schedule): started 3 s late, succeeded in minute 0; NOW+60 (schedule): started 10 s
    late, dead in minute 1; NOW+120 (manual): succeeded in minute 2; NOW+3000 waits.
    """
    job = await add_job(store, "a")
    await add_job(store, "b", paused=True)
    runs = [(0.0, Trigger.SCHEDULE, 3.0, S.SUCCEEDED), (60.0, Trigger.SCHEDULE, 10.0, S.DEAD),
            (120.0, Trigger.MANUAL, 20.0, S.SUCCEEDED)]
    for offset, trigger, late, state in runs:
        await add_occurrences(store, job, NOW + seconds(offset), trigger=trigger)
        running = await claim_one(store, NOW + seconds(offset + 1))
        started = NOW + seconds(offset + late)
        assert await complete(store, started, completion(
            running, state=state, started_at=started,
            finished_at=started + seconds(1))) == [True]
    await add_occurrences(store, job, NOW + seconds(3000))
    return job


class AdminConformance:
    @pytest.fixture
    def admin(self, store: Store) -> AdminStore:
        return store.admin()

    async def test_health_check(self, admin: AdminStore) -> None:
        await admin.health_check()

    # -- queues ------------------------------------------------------------------------------

    async def test_queue_list_counts_waiting_due_and_running(
            self, store: Store, admin: AdminStore) -> None:
        assert await _queues(admin) == []
        a = await add_job(store, "a")
        r = await add_job(store, "r", queue="reports")
        gone = await add_job(store, "gone", queue="old")
        await store.job_delete(JobDeleteParams(id=gone.id, now=NOW))
        await add_occurrences(store, a, NOW - seconds(10), NOW + seconds(100))
        await add_occurrences(store, r, NOW - seconds(5))
        assert len((await claim(store, NOW, queue="reports")).claims) == 1
        assert await _queues(admin) == [
            QueueInfo(name="default", paused=False, waiting=2, due=1, running=0),
            QueueInfo(name="reports", paused=False, waiting=0, due=0, running=1)]
        assert (await _queues(admin, NOW + seconds(100)))[0].due == 2

    async def test_queue_names_are_those_with_unfinished_runs_or_a_row(
            self, store: Store, admin: AdminStore) -> None:
        assert await admin.queue_names() == []
        a = await add_job(store, "a")
        r = await add_job(store, "r", queue="reports")
        b = await add_job(store, "b", queue="bulk")
        await add_job(store, "idle", queue="idle")  # a job, but no run: not promoted
        await add_occurrences(store, a, NOW + seconds(100))  # waiting, not due
        await add_occurrences(store, r, NOW - seconds(5))
        await add_occurrences(store, b, NOW - seconds(5))
        assert len((await claim(store, NOW, queue="reports")).claims) == 1  # running
        [done] = (await claim(store, NOW, queue="bulk")).claims
        await complete(store, NOW, completion(done, started_at=NOW))  # finished
        await _set_paused(admin, "paused", True)
        assert sorted(await admin.queue_names()) == ["default", "paused", "reports"]

    async def test_queue_set_paused_adds_a_row_and_switches(
            self, store: Store, admin: AdminStore) -> None:
        await add_job(store, "a")
        idle = await _set_paused(admin, "idle", True)
        assert idle == QueueInfo(name="idle", paused=True, waiting=0, due=0, running=0)
        assert await _set_paused(admin, "default", True) == QueueInfo(
            name="default", paused=True, waiting=0, due=0, running=0)
        assert [(q.name, q.paused) for q in await _queues(admin)] == [
            ("default", True), ("idle", True)]
        assert (await _set_paused(admin, "default", False, NOW + seconds(1))).paused is False
        assert (await _set_paused(admin, "default", False, NOW + seconds(2))).paused is False
        assert [(q.name, q.paused) for q in await _queues(admin)] == [
            ("default", False), ("idle", True)]

    async def test_a_paused_queue_is_neither_claimed_nor_waited_for(
            self, store: Store, admin: AdminStore) -> None:
        a = await add_job(store, "a")
        r = await add_job(store, "r", queue="reports")
        await add_occurrences(store, a, NOW)
        await add_occurrences(store, r, NOW)
        await _set_paused(admin, "default", True)
        assert (await claim(store, NOW + seconds(1))).claims == []
        assert await store.occurrence_next_due("default", NOW + seconds(1)) is None
        assert len((await claim(store, NOW + seconds(1), queue="reports")).claims) == 1
        assert (await store.occurrence_get(a.id, NOW)).state is S.SCHEDULED  # left as it was

        await _set_paused(admin, "default", False, NOW + seconds(2))
        assert await store.occurrence_next_due("default", NOW + seconds(2)) == NOW
        claimed = (await claim(store, NOW + seconds(2))).claims
        assert [(c.job.id, c.occurrence.scheduled_at) for c in claimed] == [(a.id, NOW)]

    # -- aggregates --------------------------------------------------------------------------

    async def test_stats_counts_and_the_per_minute_series(
            self, store: Store, admin: AdminStore) -> None:
        await _history(store)
        now = NOW + seconds(1800)
        stats = await admin.stats_get(StatsParams(now=now))
        assert (stats.jobs, stats.jobs_paused) == (2, 1)
        assert stats.occurrences_by_state == {"succeeded": 2, "dead": 1, "scheduled": 1}
        assert stats.attempts_by_outcome == {"succeeded": 2, "failed": 1}
        assert len(stats.per_minute) == 60
        assert stats.per_minute[0].minute == NOW - seconds(29 * 60)
        assert stats.per_minute[-1].minute == NOW + seconds(30 * 60)
        by_minute = {p.minute: p for p in stats.per_minute}
        first, second, third = (by_minute[NOW + seconds(m * 60)] for m in range(3))
        assert (first.finished, first.lateness_avg_seconds, first.lateness_max_seconds) == (
            1, 3.0, 3.0)
        assert (second.finished, second.lateness_avg_seconds) == (1, 10.0)
        assert (third.finished, third.lateness_avg_seconds) == (1, None)  # manual: no lateness
        assert sum(p.finished for p in stats.per_minute) == 3

    async def test_stats_window_leaves_older_attempts_out(
            self, store: Store, admin: AdminStore) -> None:
        await _history(store)
        stats = await admin.stats_get(StatsParams(now=NOW + seconds(7200), window_seconds=600))
        assert len(stats.per_minute) == 10
        assert stats.attempts_by_outcome == {}
        assert all(p.finished == 0 and p.lateness_avg_seconds is None for p in stats.per_minute)
        assert stats.occurrences_by_state == {"succeeded": 2, "dead": 1, "scheduled": 1}

    async def test_stats_and_queue_counts_of_one_namespace(
            self, store: Store, admin: AdminStore) -> None:
        await _history(store)  # in default
        other = await store.job_create(replace(create_params(job_spec("o")), namespace="other"))
        await add_occurrences(store, other, NOW + seconds(3000), NOW + seconds(3060))
        now = NOW + seconds(1800)
        mine = await admin.stats_get(StatsParams(now=now, namespace="default"))
        assert (mine.jobs, mine.jobs_paused) == (2, 1)
        assert mine.occurrences_by_state == {"succeeded": 2, "dead": 1, "scheduled": 1}
        assert mine.attempts_by_outcome == {"succeeded": 2, "failed": 1}
        assert sum(p.finished for p in mine.per_minute) == 3
        assert mine.per_minute == (await admin.stats_get(StatsParams(now=now))).per_minute
        theirs = await admin.stats_get(StatsParams(now=now, namespace="other"))
        assert (theirs.jobs, theirs.jobs_paused) == (1, 0)
        assert theirs.occurrences_by_state == {"scheduled": 2}
        assert theirs.attempts_by_outcome == {}
        assert all(p.finished == 0 and p.lateness_avg_seconds is None
                   for p in theirs.per_minute)
        every = await admin.stats_get(StatsParams(now=now))
        assert (every.jobs, every.occurrences_by_state) == (
            3, {"succeeded": 2, "dead": 1, "scheduled": 3})

        later = NOW + seconds(3030)  # default's 3000 and other's 3000 are due, 3060 is not

        async def counts(namespace: str | None) -> list[tuple[str, int, int, int]]:
            return [(q.name, q.waiting, q.due, q.running) for q in await admin.queue_list(
                QueueListParams(now=later, namespace=namespace))]

        assert await counts("default") == [("default", 1, 1, 0)]
        assert await counts("other") == [("default", 2, 1, 0)]
        assert await counts("nobody") == [("default", 0, 0, 0)]  # queues are shared
        assert await counts(None) == [("default", 3, 2, 0)]

    async def test_job_status(self, store: Store, admin: AdminStore) -> None:
        job = await _history(store)
        now = NOW + seconds(1800)
        status = await admin.job_status_get(JobStatusParams(job_id=job.id, now=now))
        assert (status.last_scheduled_at, status.last_state) == (NOW + seconds(120), "succeeded")
        assert (status.finished, status.succeeded) == (3, 2)
        assert status.success_rate == pytest.approx(2 / 3)
        assert status.lateness_avg_seconds == pytest.approx(6.5)  # scheduled runs only
        assert status.lateness_p95_seconds == pytest.approx(10.0)
        assert (status.waiting, status.running) == (1, 0)
        assert status.by_state == {"succeeded": 2, "dead": 1, "scheduled": 1}

        newest = await admin.job_status_get(JobStatusParams(job_id=job.id, now=now, last_n=1))
        assert (newest.finished, newest.succeeded, newest.success_rate) == (1, 1, 1.0)
        assert newest.lateness_avg_seconds is None

    async def test_job_status_of_a_job_without_runs(
            self, store: Store, admin: AdminStore) -> None:
        job = await add_job(store, "quiet")
        status = await admin.job_status_get(JobStatusParams(job_id=job.id, now=NOW))
        assert (status.last_scheduled_at, status.last_state, status.finished) == (None, None, 0)
        assert (status.success_rate, status.lateness_avg_seconds,
                status.lateness_p95_seconds) == (None, None, None)
        assert (status.waiting, status.running, status.by_state) == (0, 0, {})

    async def test_running_counts_in_queue_and_job_status(
            self, store: Store, admin: AdminStore) -> None:
        job = await add_job(store, "a")
        await add_occurrences(store, job, NOW)
        running = await claim_one(store, NOW)
        status = await admin.job_status_get(JobStatusParams(job_id=job.id, now=NOW))
        assert (status.running, status.waiting, status.last_state) == (1, 0, "running")
        assert (await _queues(admin))[0].running == 1
        await complete(store, NOW, completion(running, state=S.SUCCEEDED,
                                              outcome=AttemptOutcome.SUCCEEDED))
        assert (await _queues(admin))[0].running == 0

    # -- tokens ------------------------------------------------------------------------------

    async def test_token_create_and_list(self, admin: AdminStore) -> None:
        assert await admin.token_list() == []
        ci = await _token(admin, "ci", "h1", id="tok_1", scope=Scope.WRITE)
        assert ci == TokenInfo(id="tok_1", name="ci", scope=Scope.WRITE, created_at=NOW,
                               last_used_at=None, revoked_at=None)
        later = await _token(admin, "deploy", "h2", id="tok_0", now=NOW + seconds(1))
        assert await admin.token_list() == [ci, later]  # by creation time

    async def test_token_names_are_unique_among_active_tokens(self, admin: AdminStore) -> None:
        await _token(admin, "ci", "h1", id="tok_1")
        with pytest.raises(Conflict, match="already named 'ci'"):
            await _token(admin, "ci", "h2", id="tok_2")
        assert [t.id for t in await admin.token_list()] == ["tok_1"]
        await admin.token_revoke(TokenRevokeParams(ref="ci", now=NOW))
        again = await _token(admin, "ci", "h3", id="tok_3", now=NOW + seconds(1))
        assert again.revoked_at is None
        assert [(t.id, t.revoked_at) for t in await admin.token_list()] == [
            ("tok_1", NOW), ("tok_3", None)]

    async def test_token_authenticate_notes_the_last_use_now_and_then(
            self, admin: AdminStore) -> None:
        await _token(admin, "ci", "h1", id="tok_1")
        assert await admin.token_authenticate(TokenAuthenticateParams("nope", NOW)) is None
        found = await admin.token_authenticate(TokenAuthenticateParams("h1", NOW))
        assert found is not None
        assert (found.id, found.last_used_at) == ("tok_1", None)  # as it was before this use
        [listed] = await admin.token_list()
        assert listed.last_used_at == NOW
        await admin.token_authenticate(TokenAuthenticateParams("h1", NOW + seconds(30)))
        assert (await admin.token_list())[0].last_used_at == NOW  # touched at most each 60 s
        await admin.token_authenticate(TokenAuthenticateParams("h1", NOW + seconds(61)))
        assert (await admin.token_list())[0].last_used_at == NOW + seconds(61)

    async def test_token_revoke_by_id_or_name(self, admin: AdminStore) -> None:
        await _token(admin, "ci", "h1", id="tok_1")
        await _token(admin, "deploy", "h2", id="tok_2", scope=Scope.ADMIN)
        by_id = await admin.token_revoke(TokenRevokeParams(ref="tok_1", now=NOW + seconds(5)))
        assert (by_id.name, by_id.revoked_at) == ("ci", NOW + seconds(5))
        by_name = await admin.token_revoke(TokenRevokeParams(ref="deploy", now=NOW))
        assert (by_name.id, by_name.scope) == ("tok_2", Scope.ADMIN)
        assert await admin.token_authenticate(TokenAuthenticateParams("h1", NOW)) is None
        assert await admin.token_authenticate(TokenAuthenticateParams("h2", NOW)) is None
        for ref in ("ci", "tok_2", "missing"):
            with pytest.raises(TokenNotFound) as info:
                await admin.token_revoke(TokenRevokeParams(ref=ref, now=NOW))
            assert isinstance(info.value, LookupError)
            assert info.value.ref == ref
