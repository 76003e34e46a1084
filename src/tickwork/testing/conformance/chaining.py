"""Store conformance: trigger chains fire in the completion's (or rescue's) transaction, once
per end of a run, for every job named, never on a fenced-off completion."""

from __future__ import annotations

from dataclasses import replace

from tickwork.drivers.base import (
    Completion,
    JobDeleteParams,
    JobUpdateParams,
    OccurrenceCompleteParams,
    OccurrenceListParams,
    OccurrenceRescueParams,
    Store,
)
from tickwork.drivers.chaining import chain_fire
from tickwork.models import (
    ChainEvent,
    Claim,
    Delivery,
    JobSpec,
    Occurrence,
    OccurrenceState,
    Trigger,
)
from tickwork.testing.factories import (
    NOW,
    add_occurrences,
    claim_one,
    complete,
    completion,
    create_params,
    job_spec,
    seconds,
)
from tickwork.testing.factories import claim as claim_due

S = OccurrenceState


def chained_spec(name: str, *, on_success: tuple[str, ...] = (),
                 on_failure: tuple[str, ...] = (), on_dead: tuple[str, ...] = ()) -> JobSpec:
    return replace(job_spec(name), on_success=on_success, on_failure=on_failure,
                   on_dead=on_dead)


def with_chain(claim: Claim, state: S, output: str | None = None) -> Completion:
    occ = claim.occurrence
    c = completion(claim, state=state, output=output,
                   due_at=NOW + seconds(10) if state is S.RETRYING else None)
    fire = chain_fire(claim.job.spec, job_id=occ.job_id, scheduled_at=occ.scheduled_at,
                      attempt=occ.attempt, idempotency_key=occ.idempotency_key,
                      state=state, output=output)
    return replace(c, chain=fire)


class ChainConformance:
    async def _jobs(self, store: Store, *, on_success: tuple[str, ...] = (),
                    on_failure: tuple[str, ...] = (),
                    on_dead: tuple[str, ...] = ()) -> dict[str, str]:
        ids = {}
        for name in ("b", "c", "d"):
            ids[name] = (await store.job_create(create_params(job_spec(name)))).id
        spec = chained_spec("a", on_success=on_success, on_failure=on_failure, on_dead=on_dead)
        ids["a"] = (await store.job_create(create_params(spec))).id
        return ids

    async def _chained(self, store: Store, job_id: str) -> list[Occurrence]:
        runs = await store.occurrence_list(OccurrenceListParams(job_id=job_id))
        return [o for o in runs if o.trigger is Trigger.CHAIN]

    async def test_success_triggers_the_named_jobs_with_the_upstream(self, store: Store) -> None:
        ids = await self._jobs(store, on_success=("b", "c"), on_dead=("d",))
        job = await store.job_get("a")
        await add_occurrences(store, job, NOW)
        claim = await claim_one(store, NOW)
        c = with_chain(claim, S.SUCCEEDED, output="42 rows")
        params = OccurrenceCompleteParams(completions=[c], now=NOW + seconds(2))
        assert await store.occurrence_complete(params) == [True]
        assert sorted(o.job_id for o in params.chained) == sorted([ids["b"], ids["c"]])
        for name in ("b", "c"):
            (run,) = await self._chained(store, ids[name])
            assert (run.state, run.scheduled_at, run.due_at) == (
                S.SCHEDULED, NOW, NOW + seconds(2))
            assert run.idempotency_key == f"{ids[name]}:chain:2030-01-01T00:00:00Z"
            up = run.upstream
            assert up is not None
            assert (up.job_id, up.job_name, up.scheduled_at, up.attempt, up.event, up.output) == (
                ids["a"], "a", NOW, 1, ChainEvent.SUCCESS, "42 rows")
            assert up.idempotency_key == claim.occurrence.idempotency_key
        assert await self._chained(store, ids["d"]) == []
        # The same completion again is fenced off: nothing fires twice.
        assert await complete(store, NOW + seconds(3), c) == [False]
        assert len(await self._chained(store, ids["b"])) == 1

    async def test_failure_fires_per_retried_attempt_and_dead_at_the_end(
        self, store: Store
    ) -> None:
        ids = await self._jobs(store, on_failure=("c",), on_dead=("d",))
        job = await store.job_get("a")
        await add_occurrences(store, job, NOW)
        claim = await claim_one(store, NOW)
        assert await complete(store, NOW, with_chain(claim, S.RETRYING)) == [True]
        # The chained run of c is due too: claim both, and finish a's retry.
        (again,) = [c for c in (await claim_due(store, NOW + seconds(11))).claims
                    if c.occurrence.job_id == ids["a"]]
        assert await complete(store, NOW + seconds(12), with_chain(again, S.DEAD)) == [True]
        failures = await self._chained(store, ids["c"])
        assert [(o.scheduled_at, o.upstream and (o.upstream.attempt, o.upstream.event))
                for o in failures] == [(NOW, (1, ChainEvent.FAILURE))]
        (dead,) = await self._chained(store, ids["d"])
        assert dead.upstream is not None
        assert (dead.upstream.attempt, dead.upstream.event) == (2, ChainEvent.DEAD)

    async def test_a_taken_instant_moves_the_chained_run_one_microsecond_on(
        self, store: Store
    ) -> None:
        ids = await self._jobs(store, on_success=("b",))
        b = await store.job_get("b")
        await add_occurrences(store, b, NOW)  # b's own run at the same instant as a's
        await add_occurrences(store, await store.job_get("a"), NOW)
        claim = await claim_one(store, NOW)
        assert claim.occurrence.job_id == ids["a"] or claim.occurrence.job_id == ids["b"]
        if claim.occurrence.job_id == ids["b"]:
            await complete(store, NOW, completion(claim))
            claim = await claim_one(store, NOW)
        assert await complete(store, NOW, with_chain(claim, S.SUCCEEDED)) == [True]
        (run,) = await self._chained(store, ids["b"])
        assert run.scheduled_at == NOW + seconds(0.000001)

    async def test_a_rescue_that_ends_the_run_fires_on_dead(self, store: Store) -> None:
        ids = await self._jobs(store, on_dead=("d",))
        job = await store.job_update(JobUpdateParams(
            id=ids["a"], spec=replace(chained_spec("a", on_dead=("d",)),
                                      delivery=Delivery.AT_MOST_ONCE),
            next_run_at=None, now=NOW))
        await add_occurrences(store, job, NOW)
        await claim_one(store, NOW)
        params = OccurrenceRescueParams(now=NOW + seconds(3600))
        (rescued,) = await store.occurrence_rescue(params)
        assert rescued.state is S.CRASHED
        (dead,) = await self._chained(store, ids["d"])
        assert [o.job_id for o in params.chained] == [ids["d"]]
        assert dead.upstream is not None
        assert (dead.upstream.event, dead.upstream.output) == (ChainEvent.DEAD, None)

    async def test_a_target_deleted_since_is_skipped(self, store: Store) -> None:
        ids = await self._jobs(store, on_success=("b", "c"))
        await store.job_delete(JobDeleteParams(id=ids["b"], now=NOW))
        await add_occurrences(store, await store.job_get("a"), NOW)
        claim = await claim_one(store, NOW)
        assert await complete(store, NOW, with_chain(claim, S.SUCCEEDED)) == [True]
        assert await self._chained(store, ids["b"]) == []
        assert len(await self._chained(store, ids["c"])) == 1
