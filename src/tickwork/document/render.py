"""Jobs, runs, attempts, calendars and previews as JSON: one shape for every face."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tickwork.document import job_document
from tickwork.drivers.alerts import StoredAlert
from tickwork.drivers.calendars import StoredCalendar
from tickwork.models import Attempt, Job, Occurrence, rfc3339
from tickwork.schedules.structured import Fire


def when(dt: datetime | None) -> str | None:
    return None if dt is None else rfc3339(dt)


def job_json(job: Job) -> dict[str, Any]:
    return {"id": job.id, **job_document(job.spec), "next_run_at": when(job.next_run_at),
            "created_at": when(job.created_at), "updated_at": when(job.updated_at)}


def run_json(occ: Occurrence, job_name: str | None = None) -> dict[str, Any]:
    return {
        "job_id": occ.job_id, "job_name": job_name, "scheduled_at": when(occ.scheduled_at),
        "due_at": when(occ.due_at), "state": occ.state.value, "attempt": occ.attempt,
        "max_attempts": occ.max_attempts, "trigger": occ.trigger.value, "queue": occ.queue,
        "priority": occ.priority, "idempotency_key": occ.idempotency_key, "worker": occ.worker,
        "lease_until": when(occ.lease_until), "created_at": when(occ.created_at),
        "updated_at": when(occ.updated_at), "finished_at": when(occ.finished_at),
        "last_error": occ.last_error,
    }


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
