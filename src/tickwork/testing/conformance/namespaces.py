"""Namespace conformance: jobs, runs and tokens stay in their namespace, in every driver.

A driver's test module subclasses ``NamespaceConformance`` and defines ``store`` (a fresh,
migrated Store of its own). Names are unique per namespace; a lookup scoped to one namespace
never finds another's job, by id or by name; listings and chains stay inside it; tokens carry
their namespace, and one namespace cannot revoke another's; quotas are stored and usage is
counted from the jobs and attempts themselves. A namespace's ``max_runs_per_hour`` is enforced
by the claim, by queue and by key (the Redis dispatch path), as a limit holds a run: it waits,
uncharged, until the hour turns.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from tickwork.drivers.admin import (
    Scope,
    TokenAuthenticateParams,
    TokenCreateParams,
    TokenNotFound,
    TokenRevokeParams,
)
from tickwork.drivers.base import (
    JobCreateManyParams,
    JobCreateParams,
    JobDeleteParams,
    JobListParams,
    OccurrenceClaimKeysParams,
    OccurrenceCompleteParams,
    OccurrenceListParams,
    Store,
)
from tickwork.drivers.chaining import chain_fire
from tickwork.drivers.namespaces import NamespaceListParams, NamespaceSetParams, Quotas
from tickwork.errors import Conflict, JobNotFound, QuotaExceeded
from tickwork.models import Job, OccurrenceState, Trigger
from tickwork.testing.factories import (
    NOW,
    add_occurrences,
    claim,
    claim_one,
    complete,
    completion,
    job_spec,
    seconds,
)

__all__ = ["NamespaceConformance", "RunQuotaConformance"]


async def add(store: Store, name: str, namespace: str, **spec: Any) -> Job:
    return await store.job_create(JobCreateParams(
        spec=replace(job_spec(name), **spec), next_run_at=None, now=NOW, namespace=namespace))


class NamespaceConformance:
    async def test_names_are_unique_per_namespace(self, store: Store) -> None:
        a = await add(store, "report", "a")
        b = await add(store, "report", "b")
        assert (a.namespace, b.namespace) == ("a", "b")
        with pytest.raises(Conflict, match="report"):
            await add(store, "report", "a")
        with pytest.raises(Conflict, match="'x'"):  # a batch clashing with itself
            await store.job_create_many(JobCreateManyParams(jobs=[
                JobCreateParams(spec=job_spec(n), next_run_at=None, now=NOW, namespace="c")
                for n in ("x", "x")]))
        assert (await store.job_get(a.id)).namespace == "a"

    async def test_a_scoped_lookup_finds_only_its_own_namespace(self, store: Store) -> None:
        a = await add(store, "only-a", "a")
        await add(store, "both", "a")
        b_both = await add(store, "both", "b")
        assert await store.job_get(a.id, "a") == a
        assert await store.job_get("only-a", "a") == a
        for ref in (a.id, "only-a"):  # by id and by name: as if it did not exist
            with pytest.raises(JobNotFound):
                await store.job_get(ref, "b")
        assert await store.job_get("both", "b") == b_both
        assert (await store.job_get("both", "a")).namespace == "a"

    async def test_unscoped_name_lookup_prefers_default(self, store: Store) -> None:
        await add(store, "same", "zeta")
        home = await add(store, "same", "default")
        await add(store, "same", "alpha")
        assert await store.job_get("same") == home
        await store.job_delete(JobDeleteParams(id=home.id, now=NOW))
        assert (await store.job_get("same")).namespace == "alpha"

    async def test_listings_stay_in_the_namespace(self, store: Store) -> None:
        a = await add(store, "j1", "a")
        b = await add(store, "j2", "b")
        await add_occurrences(store, a, NOW)
        await add_occurrences(store, b, NOW)
        listed = await store.job_list(JobListParams(namespace="a"))
        assert [j.id for j in listed] == [a.id]
        assert {j.id for j in await store.job_list(JobListParams())} == {a.id, b.id}
        runs = await store.occurrence_list(OccurrenceListParams(namespace="b"))
        assert [o.job_id for o in runs] == [b.id]
        both = await store.occurrence_list(OccurrenceListParams())
        assert {o.job_id for o in both} == {a.id, b.id}

    async def test_deleted_jobs_stay_in_their_namespace(self, store: Store) -> None:
        a = await add(store, "gone", "a")
        await store.job_delete(JobDeleteParams(id=a.id, now=NOW))
        assert [j.id for j in await store.job_get_deleted("gone", "a")] == [a.id]
        assert await store.job_get_deleted("gone", "b") == []
        assert await store.job_get_deleted(a.id, "b") == []

    async def test_chains_name_jobs_of_their_own_namespace(self, store: Store) -> None:
        mine = await add(store, "next", "a")
        other = await add(store, "next", "b")
        up = await add(store, "first", "a", on_success=("next",))
        await add_occurrences(store, up, NOW)
        claim = await claim_one(store, NOW)
        occ = claim.occurrence
        fire = chain_fire(claim.job.spec, job_id=occ.job_id, scheduled_at=occ.scheduled_at,
                          attempt=occ.attempt, idempotency_key=occ.idempotency_key,
                          state=OccurrenceState.SUCCEEDED)
        params = OccurrenceCompleteParams(
            completions=[replace(completion(claim), chain=fire)], now=NOW + seconds(1))
        assert await store.occurrence_complete(params) == [True]
        assert [o.job_id for o in params.chained] == [mine.id]
        chained = await store.occurrence_list(OccurrenceListParams(job_id=other.id))
        assert [o for o in chained if o.trigger is Trigger.CHAIN] == []

    async def test_tokens_carry_their_namespace(self, store: Store) -> None:
        admin = store.admin()
        h1, h2 = "1" * 64, "2" * 64  # hashes, as stored
        scoped = await admin.token_create(TokenCreateParams(
            id="t1", name="ci", scope=Scope.WRITE, token_hash=h1, now=NOW, namespace="a"))
        every = await admin.token_create(TokenCreateParams(
            id="t2", name="ops", scope=Scope.ADMIN, token_hash=h2, now=NOW))
        assert (scoped.namespace, every.namespace) == ("a", None)
        found = await admin.token_authenticate(TokenAuthenticateParams(token_hash=h1, now=NOW))
        assert found is not None
        assert found.namespace == "a"
        with pytest.raises(TokenNotFound):  # namespace b cannot revoke a's token
            await admin.token_revoke(TokenRevokeParams(ref="ci", now=NOW, namespace="b"))
        with pytest.raises(TokenNotFound):
            await admin.token_revoke(TokenRevokeParams(ref="ops", now=NOW, namespace="a"))
        revoked = await admin.token_revoke(TokenRevokeParams(ref="t1", now=NOW, namespace="a"))
        assert revoked.revoked_at is not None

    async def test_quotas_and_usage(self, store: Store) -> None:
        admin = store.admin()
        hour = NOW.replace(minute=0)
        job = await add(store, "j", "a")
        await add(store, "k", "a")
        await add(store, "gone", "a")
        await store.job_delete(JobDeleteParams(id=(await store.job_get("gone", "a")).id,
                                               now=NOW))
        await add(store, "j", "b")
        await add_occurrences(store, job, NOW - seconds(7200), NOW)
        early = await claim_one(store, NOW - seconds(7200))  # started before this hour
        await complete(store, NOW - seconds(7100),
                       completion(early, started_at=NOW - seconds(7200)))
        await claim_one(store, NOW)
        await admin.namespace_set(NamespaceSetParams(
            name="a", quotas=Quotas(max_jobs=5, max_runs_per_hour=100), now=NOW))
        listed = {n.name: n for n in await admin.namespace_list(
            NamespaceListParams(hour_start=hour))}
        assert set(listed) == {"a", "b"}
        assert (listed["a"].jobs, listed["a"].runs_this_hour) == (2, 1)
        assert listed["a"].quotas == Quotas(max_jobs=5, max_runs_per_hour=100)
        assert (listed["b"].jobs, listed["b"].quotas) == (1, Quotas())
        await admin.namespace_set(NamespaceSetParams(
            name="a", quotas=Quotas(max_payload_bytes=10), now=NOW + seconds(1)))
        (a,) = await admin.namespace_list(NamespaceListParams(hour_start=hour, name="a"))
        assert a.quotas == Quotas(max_payload_bytes=10)
        (fresh,) = await admin.namespace_list(NamespaceListParams(hour_start=hour, name="new"))
        assert (fresh.name, fresh.jobs, fresh.quotas) == ("new", 0, Quotas())
        (a,) = await admin.namespace_list(NamespaceListParams(hour_start=hour, name="a"))
        assert (a.jobs, a.runs_this_hour) == (2, 1)  # listed: counted, quota or not

        async def checked(name: str) -> tuple[int, int]:
            (info,) = await admin.namespace_list(NamespaceListParams(
                hour_start=hour, name=name, quotas_only=True))
            return info.jobs, info.runs_this_hour

        assert await checked("a") == (0, 0)  # a quota check: no quota on either, no count
        await admin.namespace_set(NamespaceSetParams(
            name="a", quotas=Quotas(max_jobs=5), now=NOW + seconds(2)))
        assert await checked("a") == (2, 0)
        await admin.namespace_set(NamespaceSetParams(
            name="a", quotas=Quotas(max_runs_per_hour=100), now=NOW + seconds(3)))
        assert await checked("a") == (0, 1)

    async def test_the_job_quota_is_counted_in_the_write_transaction(self, store: Store) -> None:
        await add(store, "old", "a")
        await add(store, "other", "b")

        def batch(*names: str) -> JobCreateManyParams:
            return JobCreateManyParams(jobs=[JobCreateParams(
                spec=job_spec(n), next_run_at=None, now=NOW, namespace="a") for n in names],
                max_jobs=2)

        with pytest.raises(QuotaExceeded, match="max_jobs") as caught:
            await store.job_create_many(batch("x", "y"))
        assert (caught.value.namespace, caught.value.limit, caught.value.used) == ("a", 2, 1)
        assert [j.spec.name for j in await store.job_list(JobListParams(namespace="a"))] == [
            "old"]  # refused whole
        (made,) = await store.job_create_many(batch("x"))
        assert made.namespace == "a"
        with pytest.raises(QuotaExceeded):
            await store.job_create_many(batch("z"))

    async def test_concurrent_creations_cannot_pass_the_job_quota_together(
        self, store: Store
    ) -> None:
        def one(name: str) -> JobCreateManyParams:
            return JobCreateManyParams(jobs=[JobCreateParams(
                spec=job_spec(name), next_run_at=None, now=NOW, namespace="a")], max_jobs=3)

        results = await asyncio.gather(*(store.job_create_many(one(f"j{i}")) for i in range(6)),
                                       return_exceptions=True)
        assert sum(isinstance(r, list) for r in results) == 3
        assert all(isinstance(r, list | QuotaExceeded) for r in results), results
        assert len(await store.job_list(JobListParams(namespace="a"))) == 3


HOUR = NOW + seconds(3600)  # the top of the hour after NOW's
T = NOW + seconds(600)  # ten minutes into NOW's hour


async def due_runs(store: Store, namespace: str, count: int, at: datetime = T,
                   prefix: str = "j") -> list[Job]:
    """``count`` jobs of ``namespace``, each with a run due at ``at`` (catch-up window 60 s)."""
    jobs = []
    for i in range(count):
        job = await add(store, f"{prefix}{i}", namespace, catchup_window_seconds=60)
        await add_occurrences(store, job, at)
        jobs.append(job)
    return jobs


async def set_runs_quota(store: Store, namespace: str, limit: int, now: datetime = T) -> None:
    await store.admin().namespace_set(NamespaceSetParams(
        name=namespace, quotas=Quotas(max_runs_per_hour=limit), now=now))


async def runs_this_hour(store: Store, namespace: str, now: datetime) -> int:
    (info,) = await store.admin().namespace_list(NamespaceListParams(
        hour_start=now.replace(minute=0, second=0, microsecond=0), name=namespace))
    return info.runs_this_hour


class RunQuotaConformance:
    """``max_runs_per_hour`` holds scheduled runs in the store's claim (drivers/limits.py)."""

    async def test_runs_past_the_hourly_quota_wait_for_the_hour_to_turn(
            self, store: Store) -> None:
        await due_runs(store, "a", 5)
        await set_runs_quota(store, "a", 3)
        first = await claim(store, T)
        assert (len(first.claims), first.held) == (3, 2)
        assert first.recheck_at == HOUR  # looked at again when the hour turns
        again = await claim(store, T + seconds(60), worker="w2")
        # Noted as held, they are left out until the hour turns: nothing to wake a worker for.
        assert (again.claims, again.held, again.recheck_at) == ([], 0, None)
        assert await store.occurrence_next_due("default", T + seconds(60)) is None
        waiting = [o for o in await store.occurrence_list(OccurrenceListParams(namespace="a"))
                   if o.state is OccurrenceState.SCHEDULED]
        assert [o.attempt for o in waiting] == [0, 0]  # waiting charged no attempt
        assert await runs_this_hour(store, "a", T) == 3
        assert (await claim(store, HOUR - seconds(1))).claims == []
        assert await store.occurrence_next_due("default", HOUR) == T
        later = await claim(store, HOUR + seconds(1))  # long past the 60 s catch-up window
        assert (len(later.claims), later.missed, later.held) == (2, 0, 0)
        assert [c.limited_at for c in later.claims] == [T, T]  # when the quota first held them
        assert [c.occurrence.attempt for c in later.claims] == [1, 1]
        assert all(c.job.namespace == "a" for c in later.claims)
        assert await runs_this_hour(store, "a", HOUR + seconds(1)) == 2
        assert await runs_this_hour(store, "a", T) == 3  # the past hour's count stays

    async def test_the_quota_holds_only_its_own_namespace(self, store: Store) -> None:
        await due_runs(store, "a", 2)
        await due_runs(store, "b", 2)
        await due_runs(store, "default", 2)
        await set_runs_quota(store, "a", 1)
        await store.admin().namespace_set(NamespaceSetParams(
            name="b", quotas=Quotas(max_jobs=100), now=T))  # quotas, but none on runs
        result = await claim(store, T)
        assert (len(result.claims), result.held) == (5, 1)
        assert sorted(c.job.namespace for c in result.claims) == ["a", "b", "b", "default",
                                                                  "default"]
        assert await runs_this_hour(store, "b", T) == 2  # counted from the attempts

    async def test_runs_the_quota_holds_do_not_keep_other_namespaces_waiting(
            self, store: Store) -> None:
        await due_runs(store, "a", 4, at=T - seconds(10))  # first in claim order
        await due_runs(store, "b", 1)
        await set_runs_quota(store, "a", 1)
        started = []
        # A claim of one looks at one candidate, and at two once a limit has held one back.
        for _ in range(4):
            started += [c.job.namespace for c in (await claim(store, T, limit=1)).claims]
        assert started == ["a", "b"]  # a's held runs, once noted, no longer stand in front

    async def test_runs_started_before_the_quota_was_set_count(self, store: Store) -> None:
        await due_runs(store, "a", 2)
        assert len((await claim(store, T)).claims) == 2
        await due_runs(store, "a", 2, at=T + seconds(1), prefix="k")
        await set_runs_quota(store, "a", 3, now=T + seconds(2))
        assert await runs_this_hour(store, "a", T + seconds(2)) == 2
        result = await claim(store, T + seconds(3))
        assert (len(result.claims), result.held) == (1, 1)
        await set_runs_quota(store, "a", 3, now=T + seconds(4))  # set again: never counts less
        assert await runs_this_hour(store, "a", T + seconds(4)) == 3

    async def test_a_quota_of_zero_holds_every_run(self, store: Store) -> None:
        await due_runs(store, "a", 1)
        await set_runs_quota(store, "a", 0)
        first = await claim(store, T)
        assert (first.claims, first.held) == ([], 1)
        assert (await claim(store, HOUR + seconds(7200))).claims == []  # no hour lets it start

    async def test_claims_by_key_hold_runs_past_the_quota_until_the_hour_turns(
            self, store: Store) -> None:
        jobs = await due_runs(store, "a", 3)
        await set_runs_quota(store, "a", 2)
        result = await store.occurrence_claim_keys(OccurrenceClaimKeysParams(
            keys=[(j.id, T) for j in jobs], worker="w1", now=T))
        assert (len(result.claims), result.held) == (2, 1)
        (held,) = result.not_due  # back to the due set, for the top of the next hour
        assert held[2] == HOUR
        later = await store.occurrence_claim_keys(OccurrenceClaimKeysParams(
            keys=[held[:2]], worker="w1", now=HOUR))
        assert [(c.occurrence.attempt, c.limited_at) for c in later.claims] == [(1, T)]
