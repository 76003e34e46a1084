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
from tickwork.document.values import fmt
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
from tickwork.errors import JobNotFound
from tickwork.models import Job, rfc3339
from tickwork.scheduler.loop import Loop

FAILED = frozenset({"dead", "crashed", "missed"})
PAGE = 500
# How far before the previous pass a pass looks for failed runs: a completion is written a
# moment after its run ends, and processes' clocks differ a little.
LOOK_BACK = timedelta(seconds=30)


def _ago(seconds: float) -> str:
    return f"{fmt(seconds)}s"


def judge(job: Job, policy: AlertPolicy, facts: Any, now: datetime,
          told: datetime | None = None) -> dict[str, str | None]:
    """Each condition the policy asks for: a detail if it holds, None if it does not, absent
    if nothing can be said yet (no run has ended: neither fire nor resolve). ``told``: the
    newest failed run a pass has seen already; older ones in ``facts.failed_since`` are not
    told again."""
    out: dict[str, str | None] = {}
    recent: Sequence[tuple[datetime, str]] = facts.recent
    if policy.on and recent:
        at, state = recent[0]
        out["failed"] = (f"the run scheduled at {rfc3339(at)} ended {state}"
                         if state in policy.on else None)
        # A failure that a success followed before this pass looked is still one to tell.
        later = [(at, state) for at, state in facts.failed_since
                 if state in policy.on and (told is None or at > told)]
        if out["failed"] is None and later:
            at, state = later[0]
            out["failed"] = (f"the run scheduled at {rfc3339(at)} ended {state} "
                             "(a later run has succeeded since)")
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


def asked(policy: AlertPolicy) -> frozenset[str]:
    """The conditions a policy asks for: a firing alert of any other is resolved."""
    names = {"failed": bool(policy.on),
             "consecutive_failures": policy.consecutive_failures is not None,
             "late_start": policy.late_after is not None,
             "running_too_long": policy.running_longer_than is not None,
             "no_success": policy.no_success_within is not None}
    return frozenset(name for name, on in names.items() if on)


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
        self._last_pass: datetime | None = None  # failures that ended since are looked at
        self._told: dict[str, datetime] = {}  # job -> the newest failed run a pass has seen

    async def run_once(self, now: datetime) -> int:
        """One pass over every job with alerts; returns how many alerts fired or resolved."""
        shards = None if self.shards is None else self.shards()
        if shards is not None and not shards:
            return 0
        firing = {(a.job_id, a.condition) for a in await self.store.alert_list(
            AlertListParams(state="firing", limit=MAX_ALERTS))}
        since = None if self._last_pass is None else self._last_pass - LOOK_BACK
        self._last_pass = now
        told, self._told = self._told, {}
        changed, after, judged = 0, "", set()
        while True:
            jobs = await self.store.alert_jobs(AlertJobsParams(
                after_id=after, limit=PAGE, every_job=self.defaults.any, shards=shards))
            for job in jobs:
                changed += await self._judge(job, firing, now, since, told.get(job.id))
                judged.add(job.id)
            if len(jobs) < PAGE:
                break
            after = jobs[-1].id
        changed += await self._resolve_unjudged(firing, judged, shards, now)
        if changed and self.on_changed is not None:
            self.on_changed()
        return changed

    def _policy(self, job: Job) -> AlertPolicy | None:
        text = self.defaults.text_for(job.spec.alerts, job.spec.queue)
        return None if text is None else alert_policy(text)

    async def _judge(self, job: Job, firing: set[tuple[str, str]], now: datetime,
                     since: datetime | None, told: datetime | None) -> int:
        policy = self._policy(job)
        if policy is None:
            return await self._resolve_all(job, None, firing, now, "the job has no alerts now")
        facts = await self.store.alert_facts(AlertFactsParams(
            job_id=job.id, now=now, recent=max(policy.consecutive_failures or 1, 1),
            late_after=policy.late_after, running_longer_than=policy.running_longer_than,
            ended_since=since))
        dropped = {(job.id, c) for j, c in firing if j == job.id and c not in asked(policy)}
        changed = await self._resolve_all(job, policy, dropped, now,
                                          "the job no longer asks for this alert")
        failed = [at for at, state in [*facts.failed_since, *facts.recent[:1]]
                  if state in FAILED]
        if failed or told is not None:
            self._told[job.id] = max([*failed, *([told] if told else [])])
        for condition, detail in judge(job, policy, facts, now, told).items():
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

    async def _resolve_unjudged(self, firing: set[tuple[str, str]], judged: set[str],
                                shards: frozenset[int] | None, now: datetime) -> int:
        """Firing alerts of jobs no pass judges any more: deleted jobs, and jobs of this
        evaluator's shards whose document no longer has alerts."""
        changed = 0
        for job_id in sorted({j for j, _ in firing} - judged):
            try:
                job = await self.store.job_get(job_id)
            except JobNotFound:
                gone = await self.store.job_get_deleted(job_id)
                if gone:
                    changed += await self._resolve_all(
                        gone[0], self._policy(gone[0]), firing, now, "the job was deleted")
                continue
            if shards is None or job.shard in shards:
                changed += await self._resolve_all(job, None, firing, now,
                                                   "the job has no alerts now")
        return changed

    async def _resolve_all(self, job: Job, policy: AlertPolicy | None,
                           firing: set[tuple[str, str]], now: datetime, why: str) -> int:
        """Resolves this job's firing alerts among ``firing`` (``policy``: whose channels
        hear of it, if it asks for resolved messages; None: nobody)."""
        changed = 0
        for job_id, condition in sorted(firing):
            if job_id != job.id:
                continue
            detail = f"resolved: {why}"
            resolved = await self.store.alert_resolve(AlertResolveParams(
                job_id=job.id, condition=condition, detail=detail, now=now,
                deliveries=_deliveries(job, policy, condition, "resolved", detail=detail,
                                       now=now)
                if policy is not None and policy.resolved else ()))
            changed += resolved is not None
            self._log.info("alert %s on job %s resolved: %s", condition, job.spec.name, why)
        return changed

    async def tick(self, now: datetime) -> bool:
        await self.run_once(now)
        return False
