"""The alert evaluator: judges the jobs that have alerts and fires or resolves them.

Each pass reads the jobs with an alert policy (their own, or a default from the settings),
page by page, and for each the few facts its conditions need (its last ended runs, its last
success, its oldest late run, its oldest running attempt), then fires the conditions that
hold and resolves the firing ones that no longer do. The store records one firing alert per
job and condition (a unique index), so passes that overlap, in one process or in schedulers
that hold overlapping shards for a moment, fire it once; its deliveries are written with it
and sent by ``AlertDeliverer``. The embedded service wakes a pass when a run ends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from tickwork.clock import Clock
from tickwork.document.alerts import (
    NO_DEFAULTS,
    AlertDefaults,
    AlertPolicy,
    alert_policy,
    channel_payload,
)
from tickwork.document.fields import fmt
from tickwork.drivers.alerts import (
    MAX_ALERTS,
    AlertFactsParams,
    AlertFireParams,
    AlertJobsParams,
    AlertListParams,
    AlertResolveParams,
    NewDelivery,
)
from tickwork.drivers.base import Store
from tickwork.models import Job, rfc3339
from tickwork.scheduler.loop import Loop

FAILED = frozenset({"dead", "crashed", "missed"})
PAGE = 500


def _ago(seconds: float) -> str:
    return f"{fmt(seconds)}s"


def judge(job: Job, policy: AlertPolicy, facts: Any, now: datetime
          ) -> dict[str, str | None]:
    """Each condition the policy asks for: a detail if it holds, None if it does not, absent
    if nothing can be said yet (no run has ended: neither fire nor resolve)."""
    out: dict[str, str | None] = {}
    recent: Sequence[tuple[datetime, str]] = facts.recent
    if policy.on and recent:
        at, state = recent[0]
        out["failed"] = (f"the run scheduled at {rfc3339(at)} ended {state}"
                         if state in policy.on else None)
    n = policy.consecutive_failures
    if n is not None and recent:
        streak = 0
        for _, state in recent:
            if state not in FAILED:
                break
            streak += 1
        out["consecutive_failures"] = (f"the last {streak} runs failed (alert at {n})"
                                       if streak >= n else None)
    if policy.late_after is not None:
        paused = job.spec.paused
        out["late_start"] = None if paused or facts.late_since is None else (
            f"the run due at {rfc3339(facts.late_since)} has not started "
            f"{_ago(policy.late_after)} after it")
    if policy.running_longer_than is not None:
        out["running_too_long"] = None if facts.running_since is None else (
            f"a run has been running since {rfc3339(facts.running_since)}, longer than "
            f"{_ago(policy.running_longer_than)}")
    z = policy.no_success_within
    if z is not None and job.spec.schedule.type != "at":
        last = facts.last_success_at
        since = last or job.created_at
        overdue = not job.spec.paused and now - since > timedelta(seconds=z)
        seen = "last succeeded at " + rfc3339(last) if last else "has never succeeded"
        out["no_success"] = f"the job {seen}, more than {_ago(z)} ago" if overdue else None
    return out


def _deliveries(job: Job, policy: AlertPolicy, condition: str, event: str, *, detail: str,
                now: datetime) -> list[NewDelivery]:
    word = "ALERT" if event == "firing" else "RESOLVED"
    subject = f"[tickwork] {word}: {job.spec.name}: {condition.replace('_', ' ')}"
    text = f"{subject}\n{detail}\nat {rfc3339(now)}"
    body = {"type": f"alert.{event}", "job_id": job.id, "job_name": job.spec.name,
            "condition": condition, "detail": detail, "at": rfc3339(now)}
    found = []
    for index, channel in enumerate(policy.channels):
        _, payload = channel_payload(channel, subject, text, body)
        found.append(NewDelivery(channel=index, kind=str(channel["kind"]),
                                 payload=json.dumps(payload)))
    return found


class AlertEvaluator(Loop):
    name = "alerts"

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        interval_seconds: float = 5.0,
        defaults: AlertDefaults = NO_DEFAULTS,
        shards: Callable[[], frozenset[int]] | None = None,
        on_changed: Callable[[], None] | None = None,
    ) -> None:
        """``shards``: the shards whose jobs this evaluator judges now (a ShardLeaser's);
        None: all. ``on_changed``: called after a pass fired or resolved something (the
        delivery loop's ``wake``)."""
        super().__init__(clock=clock, interval_seconds=interval_seconds)
        self.store = store
        self.defaults = defaults
        self.shards = shards
        self.on_changed = on_changed

    async def run_once(self, now: datetime) -> int:
        """One pass over every job with alerts; returns how many alerts fired or resolved."""
        shards = None if self.shards is None else self.shards()
        if shards is not None and not shards:
            return 0
        firing = {(a.job_id, a.condition) for a in await self.store.alert_list(
            AlertListParams(state="firing", limit=MAX_ALERTS))}
        changed, after = 0, ""
        while True:
            jobs = await self.store.alert_jobs(AlertJobsParams(
                after_id=after, limit=PAGE, every_job=self.defaults.any, shards=shards))
            for job in jobs:
                changed += await self._judge(job, firing, now)
            if len(jobs) < PAGE:
                break
            after = jobs[-1].id
        if changed and self.on_changed is not None:
            self.on_changed()
        return changed

    async def _judge(self, job: Job, firing: set[tuple[str, str]], now: datetime) -> int:
        text = self.defaults.text_for(job.spec.alerts, job.spec.queue)
        if text is None:
            return 0
        policy = alert_policy(text)
        facts = await self.store.alert_facts(AlertFactsParams(
            job_id=job.id, now=now, recent=max(policy.consecutive_failures or 1, 1),
            late_after=policy.late_after, running_longer_than=policy.running_longer_than))
        changed = 0
        for condition, detail in judge(job, policy, facts, now).items():
            is_firing = (job.id, condition) in firing
            if detail is not None and not is_firing:
                fired = await self.store.alert_fire(AlertFireParams(
                    job_id=job.id, job_name=job.spec.name, condition=condition, detail=detail,
                    now=now, cooldown_seconds=policy.cooldown,
                    deliveries=_deliveries(job, policy, condition, "firing", detail=detail,
                                           now=now)))
                changed += fired is not None
                self._log.warning("alert %s on job %s: %s", condition, job.spec.name, detail)
            elif detail is None and is_firing:
                recovered = f"recovered: {condition.replace('_', ' ')} no longer holds"
                resolved = await self.store.alert_resolve(AlertResolveParams(
                    job_id=job.id, condition=condition, detail=recovered, now=now,
                    deliveries=_deliveries(job, policy, condition, "resolved", detail=recovered,
                                now=now)
                    if policy.resolved else ()))
                changed += resolved is not None
                self._log.info("alert %s on job %s resolved", condition, job.spec.name)
        return changed

    async def tick(self, now: datetime) -> bool:
        await self.run_once(now)
        return False
