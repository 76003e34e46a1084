"""Jobs, runs, attempts, calendars and previews as JSON: one shape for every face."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tickwork.document import job_document
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
