"""The alert part of the Store conformance suite (``drivers/alerts.py``).

A driver's test module subclasses ``AlertConformance`` and defines a ``store`` fixture: a
fresh, migrated store of its own. Instants come from ``factories.NOW``.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from tickwork.drivers.alerts import (
    DELIVERED,
    FAILED,
    FIRING,
    PENDING,
    RESOLVED,
    AlertFactsParams,
    AlertFireParams,
    AlertJobsParams,
    AlertListParams,
    AlertResolveParams,
    DeliveryClaimParams,
    DeliveryFinishParams,
    NewDelivery,
)
from tickwork.drivers.base import Store
from tickwork.models import OccurrenceState
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim_one,
    complete,
    completion,
    create_params,
    job_spec,
    seconds,
)

__all__ = ["AlertConformance"]

SLACK = NewDelivery(channel=0, kind="slack", payload='{"text": "x"}')
HOOK = NewDelivery(channel=1, kind="webhook", payload='{"body": {}}')
ALERTS = '{"channels":[{"kind":"webhook","url":"https://example.org/a"}]}'


def _fire(job_id: str, offset: float = 0, condition: str = "failed",
          cooldown: float = 3600) -> AlertFireParams:
    return AlertFireParams(job_id=job_id, job_name="job", condition=condition,
                           detail="run dead", now=NOW + seconds(offset),
                           cooldown_seconds=cooldown, deliveries=[SLACK, HOOK])


def _resolve(job_id: str, offset: float, condition: str = "failed") -> AlertResolveParams:
    return AlertResolveParams(job_id=job_id, condition=condition, detail="run succeeded",
                              now=NOW + seconds(offset), deliveries=[SLACK])


class AlertConformance:
    async def test_fire_once_then_resolve(self, store: Store) -> None:
        fired = await store.alert_fire(_fire("j1"))
        assert fired is not None
        assert (fired.state, fired.notified, fired.fired_at) == (FIRING, True, NOW)
        assert [(d.event, d.channel, d.state, d.attempts) for d in fired.deliveries] == [
            ("firing", 0, PENDING, 0), ("firing", 1, PENDING, 0)]
        assert await store.alert_fire(_fire("j1", 5)) is None  # firing already
        other = await store.alert_fire(_fire("j1", 5, condition="late_start"))
        assert other is not None
        resolved = await store.alert_resolve(_resolve("j1", 10))
        assert resolved is not None
        assert (resolved.id, resolved.state, resolved.resolved_at) == (
            fired.id, RESOLVED, NOW + seconds(10))
        assert [d.event for d in resolved.deliveries] == ["firing", "firing", "resolved"]
        assert await store.alert_resolve(_resolve("j1", 11)) is None

    async def test_racing_fires_record_one(self, store: Store) -> None:
        results = await asyncio.gather(*(store.alert_fire(_fire("j1")) for _ in range(5)))
        assert sum(r is not None for r in results) == 1
        [alert] = await store.alert_list(AlertListParams(job_id="j1"))
        assert len(alert.deliveries) == 2

    async def test_cooldown_records_but_sends_nothing(self, store: Store) -> None:
        await store.alert_fire(_fire("j1", 0, cooldown=600))
        await store.alert_resolve(_resolve("j1", 100))
        quiet = await store.alert_fire(_fire("j1", 200, cooldown=600))
        assert quiet is not None
        assert (quiet.notified, quiet.deliveries) == (False, ())
        resolved = await store.alert_resolve(_resolve("j1", 300))
        assert resolved is not None
        assert resolved.deliveries == ()  # never told, so no resolved message either
        loud = await store.alert_fire(_fire("j1", 700, cooldown=600))
        assert loud is not None
        assert loud.notified

    async def test_list_newest_first_with_cursor(self, store: Store) -> None:
        for i in range(3):
            await store.alert_fire(_fire(f"j{i}", i))
        await store.alert_resolve(_resolve("j0", 10))
        page = await store.alert_list(AlertListParams(limit=2))
        assert [a.job_id for a in page] == ["j2", "j1"]
        rest = await store.alert_list(AlertListParams(before=(page[-1].fired_at, page[-1].id)))
        assert [a.job_id for a in rest] == ["j0"]
        assert [a.job_id for a in await store.alert_list(AlertListParams(state=RESOLVED))] == [
            "j0"]
        assert [a.job_id for a in await store.alert_list(AlertListParams(state=FIRING))] == [
            "j2", "j1"]

    async def test_deliveries_are_claimed_retried_and_fenced(self, store: Store) -> None:
        await store.alert_fire(_fire("j1"))
        taken = await store.delivery_claim(DeliveryClaimParams(now=NOW, lease_seconds=60))
        assert [(d.channel, d.attempts) for d in taken] == [(0, 1), (1, 1)]
        assert await store.delivery_claim(DeliveryClaimParams(now=NOW + seconds(1))) == []
        slack, hook = taken
        assert await store.delivery_finish(DeliveryFinishParams(id=slack.id, attempt=1,
                                                                now=NOW + seconds(1)))
        assert await store.delivery_finish(DeliveryFinishParams(
            id=hook.id, attempt=1, now=NOW + seconds(1), error="HTTP 500",
            retry_at=NOW + seconds(5)))
        again = await store.delivery_claim(DeliveryClaimParams(now=NOW + seconds(5)))
        assert [(d.id, d.attempts, d.last_error) for d in again] == [(hook.id, 2, "HTTP 500")]
        assert not await store.delivery_finish(DeliveryFinishParams(  # a stale attempt
            id=hook.id, attempt=1, now=NOW + seconds(6)))
        assert await store.delivery_finish(DeliveryFinishParams(
            id=hook.id, attempt=2, now=NOW + seconds(6), error="HTTP 500"))
        [alert] = await store.alert_list(AlertListParams())
        assert [(d.state, d.attempts, d.last_error) for d in alert.deliveries] == [
            (DELIVERED, 1, None), (FAILED, 2, "HTTP 500")]
        assert alert.deliveries[1].finished_at == NOW + seconds(6)

    async def test_facts(self, store: Store) -> None:
        job = await add_job(store, "watched", alerts=ALERTS)
        await add_job(store, "plain")
        await add_occurrences(store, job, NOW, NOW + seconds(60), NOW + seconds(120))
        first = await claim_one(store, NOW)
        await complete(store, NOW + seconds(1), completion(first))
        second = await claim_one(store, NOW + seconds(60))
        await complete(store, NOW + seconds(61), completion(
            second, state=OccurrenceState.DEAD, started_at=NOW + seconds(60)))
        now = NOW + seconds(400)
        facts = await store.alert_facts(AlertFactsParams(
            job_id=job.id, now=now, recent=5, late_after=60, running_longer_than=60))
        assert facts.recent == [(NOW + seconds(60), "dead"), (NOW, "succeeded")]
        assert facts.last_success_at == NOW + seconds(1)
        assert facts.late_since == NOW + seconds(120)
        assert facts.running_since is None
        assert facts.failed_since == []  # not asked
        for since, failed in ((NOW + seconds(61), [(NOW + seconds(60), "dead")]),
                              (NOW + seconds(62), [])):
            facts = await store.alert_facts(AlertFactsParams(
                job_id=job.id, now=now, ended_since=since))
            assert facts.failed_since == failed, since
        await claim_one(store, now)
        facts = await store.alert_facts(AlertFactsParams(
            job_id=job.id, now=now + seconds(100), late_after=60, running_longer_than=60))
        assert (facts.late_since, facts.running_since) == (None, now)
        watched = await store.alert_jobs(AlertJobsParams())
        assert [j.spec.name for j in watched] == ["watched"]
        assert watched[0].spec.alerts == ALERTS
        every = await store.alert_jobs(AlertJobsParams(every_job=True))
        assert sorted(j.spec.name for j in every) == ["plain", "watched"]

    async def test_a_delivery_carries_its_jobs_namespace(self, store: Store) -> None:
        """The channels' secrets resolve in the job's namespace; "" once the job is gone."""
        job = await store.job_create(replace(create_params(job_spec("j")), namespace="acme"))
        of_job = await store.alert_fire(_fire(job.id))
        gone = await store.alert_fire(_fire("gone"))
        assert of_job is not None
        assert gone is not None
        taken = await store.delivery_claim(DeliveryClaimParams(now=NOW, lease_seconds=60))
        namespaces = {(d.alert_id, d.channel): d.namespace for d in taken}
        assert namespaces == {(of_job.id, 0): "acme", (of_job.id, 1): "acme",
                              (gone.id, 0): "", (gone.id, 1): ""}
