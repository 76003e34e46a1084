"""The API's JSON as tickwork's models (the inverse of tickwork.document.render): what
``RemoteClient`` returns is the same objects ``AsyncClient`` does."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tickwork.client.calendars import CalendarChange
from tickwork.document import parse_job_document
from tickwork.drivers.alerts import AlertDelivery, StoredAlert
from tickwork.drivers.calendars import StoredCalendar
from tickwork.drivers.namespaces import NamespaceInfo, Quotas
from tickwork.models import (
    Attempt,
    AttemptOutcome,
    AuditAction,
    AuditEntry,
    ChainEvent,
    Job,
    Occurrence,
    OccurrenceState,
    Overlap,
    Trigger,
    Upstream,
)

_JOB_FIELDS = ("id", "next_run_at", "created_at", "updated_at", "created_by", "updated_by",
               "namespace")
# what the API adds to a calendar document (calendar_json, the calendar page's "jobs",
# change_json's outcome)
_CALENDAR_FIELDS = ("version", "created_at", "updated_at", "jobs", "replanned_jobs",
                    "removed_runs", "warnings")


def namespace_from_json(item: Mapping[str, Any]) -> NamespaceInfo:
    return NamespaceInfo(name=item["name"], jobs=item["jobs"],
                         runs_this_hour=item["runs_this_hour"],
                         quotas=Quotas(max_jobs=item["max_jobs"],
                                       max_runs_per_hour=item["max_runs_per_hour"],
                                       max_payload_bytes=item["max_payload_bytes"]))


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def maybe_instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def job_from_json(doc: Mapping[str, Any]) -> Job:
    spec = parse_job_document({k: v for k, v in doc.items() if k not in _JOB_FIELDS}).spec
    return Job(id=doc["id"], spec=spec, next_run_at=maybe_instant(doc.get("next_run_at")),
               created_at=instant(doc["created_at"]), updated_at=instant(doc["updated_at"]),
               created_by=doc.get("created_by"), updated_by=doc.get("updated_by"),
               namespace=doc.get("namespace", "default"))


def run_from_json(doc: Mapping[str, Any]) -> Occurrence:
    return Occurrence(
        job_id=doc["job_id"], scheduled_at=instant(doc["scheduled_at"]),
        due_at=instant(doc["due_at"]), queue=doc["queue"], priority=doc["priority"],
        state=OccurrenceState(doc["state"]), attempt=doc["attempt"],
        max_attempts=doc["max_attempts"], trigger=Trigger(doc["trigger"]),
        idempotency_key=doc["idempotency_key"], created_at=instant(doc["created_at"]),
        updated_at=instant(doc["updated_at"]), lease_until=maybe_instant(doc["lease_until"]),
        worker=doc.get("worker"), finished_at=maybe_instant(doc.get("finished_at")),
        last_error=doc.get("last_error"), upstream=upstream_from_json(doc.get("upstream")),
        overlap=Overlap(doc["overlap"]) if doc.get("overlap") else None)


def upstream_from_json(doc: Mapping[str, Any] | None) -> Upstream | None:
    if doc is None:
        return None
    return Upstream(job_id=doc["job_id"], job_name=doc["job_name"],
                    scheduled_at=instant(doc["scheduled_at"]), attempt=doc["attempt"],
                    event=ChainEvent(doc["event"]), idempotency_key=doc["idempotency_key"],
                    output=doc.get("output"))


def audit_from_json(doc: Mapping[str, Any]) -> AuditEntry:
    return AuditEntry(id=doc["id"], at=instant(doc["at"]), actor=doc.get("actor"),
                      action=AuditAction(doc["action"]), job_id=doc.get("job_id"),
                      job_name=doc.get("job_name"),
                      scheduled_at=maybe_instant(doc.get("scheduled_at")),
                      details=doc.get("details"))


def alert_from_json(doc: Mapping[str, Any]) -> StoredAlert:
    """An alert as the API shows it: its deliveries without their payloads, which the API
    never sends (a webhook URL is a credential)."""
    fired = instant(doc["fired_at"])
    deliveries = tuple(AlertDelivery(
        id=d["id"], alert_id=doc["id"], event=d["event"], channel=d["channel"], kind=d["kind"],
        payload="", state=d["state"], attempts=d["attempts"],
        next_attempt_at=maybe_instant(d.get("next_attempt_at")) or instant(d["created_at"]),
        created_at=instant(d["created_at"]), finished_at=maybe_instant(d.get("finished_at")),
        last_error=d.get("last_error")) for d in doc.get("deliveries", ()))
    return StoredAlert(id=doc["id"], job_id=doc["job_id"], job_name=doc["job_name"],
                       condition=doc["condition"], state=doc["state"], detail=doc["detail"],
                       notified=doc["notified"], fired_at=fired, updated_at=fired,
                       resolved_at=maybe_instant(doc.get("resolved_at")),
                       deliveries=deliveries)


def attempt_from_json(doc: Mapping[str, Any], run: Occurrence) -> Attempt:
    return Attempt(
        job_id=run.job_id, scheduled_at=run.scheduled_at, number=doc["number"],
        worker=doc["worker"], queued_at=instant(doc["queued_at"]),
        claimed_at=instant(doc["claimed_at"]), started_at=maybe_instant(doc["started_at"]),
        finished_at=maybe_instant(doc["finished_at"]),
        outcome=AttemptOutcome(doc["outcome"]) if doc.get("outcome") else None,
        output=doc.get("output"), error=doc.get("error"))


def calendar_from_json(doc: Mapping[str, Any]) -> StoredCalendar:
    document = {k: v for k, v in doc.items() if k not in _CALENDAR_FIELDS}
    return StoredCalendar(name=doc["name"], document=document, version=doc["version"],
                          created_at=instant(doc["created_at"]),
                          updated_at=instant(doc["updated_at"]))


def change_from_json(doc: Mapping[str, Any]) -> CalendarChange:
    return CalendarChange(calendar=calendar_from_json(doc), jobs=doc.get("replanned_jobs", 0),
                          removed=doc.get("removed_runs", 0),
                          warnings=tuple(doc.get("warnings", ())))
