"""Jobs, runs, attempts, calendars and previews as JSON: one shape for every face."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tickwork.document import job_document
from tickwork.drivers.alerts import StoredAlert
from tickwork.drivers.calendars import StoredCalendar
from tickwork.models import (
    Attempt,
    AuditEntry,
    Backfill,
    Job,
    JobSpec,
    Occurrence,
    Overlap,
    Upstream,
    rfc3339,
)
from tickwork.schedules.structured import Fire


def when(dt: datetime | None) -> str | None:
    return None if dt is None else rfc3339(dt)


def job_json(job: Job) -> dict[str, Any]:
    return {"id": job.id, **job_document(job.spec), "next_run_at": when(job.next_run_at),
            "created_at": when(job.created_at), "updated_at": when(job.updated_at),
            "created_by": job.created_by, "updated_by": job.updated_by,
            "namespace": job.namespace}


def spec_diff(before: JobSpec, after: JobSpec) -> dict[str, Any]:
    """The job document's top-level fields that differ: ``{field: {"before", "after"}}``."""
    old, new = job_document(before), job_document(after)
    return {key: {"before": old.get(key), "after": new.get(key)}
            for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key)}


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    return {"id": entry.id, "at": when(entry.at), "actor": entry.actor,
            "action": entry.action.value, "job_id": entry.job_id, "job_name": entry.job_name,
            "scheduled_at": when(entry.scheduled_at), "details": entry.details}


def run_json(occ: Occurrence, job_name: str | None = None) -> dict[str, Any]:
    return {
        "job_id": occ.job_id, "job_name": job_name, "scheduled_at": when(occ.scheduled_at),
        "due_at": when(occ.due_at), "state": occ.state.value, "attempt": occ.attempt,
        "max_attempts": occ.max_attempts, "trigger": occ.trigger.value, "queue": occ.queue,
        "priority": occ.priority, "idempotency_key": occ.idempotency_key, "worker": occ.worker,
        "lease_until": when(occ.lease_until), "created_at": when(occ.created_at),
        "updated_at": when(occ.updated_at), "finished_at": when(occ.finished_at),
        "last_error": occ.last_error, "upstream": upstream_json(occ.upstream),
        "overlap": None if occ.overlap is None else occ.overlap.value,
    }


# What each overlap policy (G8) does to a run due while another run of its job is running.
OVERLAP_MEANING = {
    Overlap.ALLOW_ALL: "runs alongside the others",
    Overlap.SKIP: "is skipped (skipped_overlap) while an earlier run of the job runs",
    Overlap.BUFFER_ONE: "waits while an earlier run runs; one waits, later ones are skipped",
    Overlap.BUFFER_ALL: "waits its turn while an earlier run runs: one at a time, in order",
    Overlap.CANCEL_PREVIOUS: "cancels the running one and the older waiting ones; only the "
                             "newest runs",
}


def overlap_note(b: Backfill) -> str:
    """The overlap a backfill's runs are claimed under, in words."""
    whose = "chosen for this backfill" if b.overlap_chosen else "the job's own"
    return f"{b.overlap.value} ({whose}): each run {OVERLAP_MEANING[b.overlap]}"


def overlap_warning(b: Backfill) -> str | None:
    """What a backfill under a policy that looks at running runs does to its new runs: they
    are all due at once, so most of them are held back; None when that cannot happen."""
    if len(b.new) < 2 or b.overlap in (Overlap.ALLOW_ALL, Overlap.BUFFER_ALL):
        return None
    fate = {Overlap.SKIP: "skipped (the first runs)",
            Overlap.BUFFER_ONE: "skipped (the first runs, one more waits)",
            Overlap.CANCEL_PREVIOUS: "cancelled (only the newest runs)"}[b.overlap]
    return (f"the {len(b.new)} new runs are all due now, so under {b.overlap.value} most of "
            f"them are {fate}; choose allow_all (all at once) or buffer_all "
            "(one after another) to run every one")


def backfill_json(b: Backfill, job_name: str | None = None) -> dict[str, Any]:
    """A backfill or its preview: the fire times, those that have a run already (left as they
    are), the overlap the new runs get, and (done, not previewed) the runs stored."""
    return {
        "dry_run": b.dry_run, "job_id": b.job_id, "job_name": job_name,
        "from": when(b.since), "to": when(b.until), "count": len(b.fire_times),
        "fire_times": [when(t) for t in b.fire_times],
        "existing": [when(t) for t in b.existing], "new": len(b.new), "created": b.created,
        "overlap": b.overlap.value, "overlap_source": "backfill" if b.overlap_chosen else "job",
        "overlap_note": overlap_note(b), "overlap_warning": overlap_warning(b),
        "items": [run_json(o, job_name) for o in b.occurrences],
    }


def upstream_json(up: Upstream | None) -> dict[str, Any] | None:
    """The run whose end triggered a chained run (trigger ``chain``), else None."""
    if up is None:
        return None
    return {"job_id": up.job_id, "job_name": up.job_name, "scheduled_at": when(up.scheduled_at),
            "attempt": up.attempt, "event": up.event.value,
            "idempotency_key": up.idempotency_key, "output": up.output}


def attempt_json(a: Attempt) -> dict[str, Any]:
    return {
        "number": a.number, "worker": a.worker, "queued_at": when(a.queued_at),
        "claimed_at": when(a.claimed_at), "started_at": when(a.started_at),
        "finished_at": when(a.finished_at), "duration_seconds": a.duration_seconds,
        "outcome": a.outcome.value if a.outcome else None, "output": a.output, "error": a.error,
    }


def calendar_json(calendar: StoredCalendar) -> dict[str, Any]:
    return {**calendar.document, "version": calendar.version,
            "created_at": when(calendar.created_at), "updated_at": when(calendar.updated_at)}


def fire_json(fire: Fire) -> dict[str, Any]:
    """A previewed fire time; ``excluded_by`` names the calendar that drops it, if one does."""
    return {"at": when(fire.at), "excluded_by": fire.excluded_by, "reason": fire.reason}


def alert_json(alert: StoredAlert) -> dict[str, Any]:
    """An alert and its deliveries; a delivery's payload (webhook URLs are credentials) is
    never shown, only where it went and how each try ended."""
    return {
        "id": alert.id, "job_id": alert.job_id, "job_name": alert.job_name,
        "condition": alert.condition, "state": alert.state, "detail": alert.detail,
        "notified": alert.notified, "fired_at": when(alert.fired_at),
        "resolved_at": when(alert.resolved_at),
        "deliveries": [{
            "id": d.id, "event": d.event, "channel": d.channel, "kind": d.kind,
            "state": d.state, "attempts": d.attempts, "last_error": d.last_error,
            "created_at": when(d.created_at), "finished_at": when(d.finished_at),
            "next_attempt_at": when(d.next_attempt_at) if d.state == "pending" else None,
        } for d in alert.deliveries],
    }
