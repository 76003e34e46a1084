"""The enqueue request: a one-off job described by its kind and payload, without a name.

``{"kind": "http", "payload": {...}, "at": "2030-01-01T09:00:00Z", "queue": "default",
"retry": {...}, "dedupe_key": "order-42", "dedupe_window_seconds": 3600}``. Any other field of
a job document may be given too (``priority``, ``timeout_seconds``, ``tags``, even ``name``),
except ``schedule``: the schedule is ``{"at": at}``, and ``at`` left out means now. A job
without a name gets ``<kind>-<uuid7>``: unique, and sorted by when it was enqueued.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tickwork.document import BulkParser, check_runs, first_run
from tickwork.document.fields import parse_instant
from tickwork.document.text import got, not_unicode
from tickwork.document.values import bounded_seconds, string
from tickwork.drivers.codec import new_job_id
from tickwork.errors import ValidationError
from tickwork.models import JobSpec

ENQUEUE_FIELDS = ("at", "dedupe_key", "dedupe_window_seconds")
DEDUPE_KEY_MAX_CHARS = 200
DEDUPE_WINDOW_DEFAULT_SECONDS = 3600.0
DEDUPE_WINDOW_MAX_SECONDS = 30 * 86400.0
_window = bounded_seconds(zero_ok=False, most=DEDUPE_WINDOW_MAX_SECONDS)


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    spec: JobSpec
    dedupe_key: str | None = None
    dedupe_window: timedelta = timedelta(seconds=DEDUPE_WINDOW_DEFAULT_SECONDS)


def uuid7() -> uuid.UUID:
    """A version 7 UUID (RFC 9562): 48 bits of Unix milliseconds, then random bits."""
    return uuid.UUID(hex=new_job_id())


def new_name(kind: str) -> str:
    """The name an enqueued job without one gets: ``<kind>-<uuid7>``."""
    return f"{kind}-{uuid7()}"


def parse_enqueue(doc: object, *, now: datetime,
                  parser: BulkParser | None = None) -> EnqueueRequest:
    """Validate an enqueue request; errors name the field, as a job document's do."""
    if not isinstance(doc, Mapping):
        raise ValidationError("", f"the enqueue request must be a JSON object ({got(doc)})")
    if "schedule" in doc:
        raise ValidationError("schedule", "an enqueued job runs once, at 'at' (default: "
                              "now); create a job for a schedule")
    job: dict[str, Any] = {k: v for k, v in doc.items() if k not in ENQUEUE_FIELDS}
    at = now if doc.get("at") is None else parse_instant(doc["at"], "at")
    key = doc.get("dedupe_key")
    if key is not None:
        key = string(key, "dedupe_key")
        reason = not_unicode(key)
        if reason is not None:
            raise ValidationError("dedupe_key", reason)
        if not 0 < len(key) <= DEDUPE_KEY_MAX_CHARS:
            raise ValidationError("dedupe_key", f"must be 1 to {DEDUPE_KEY_MAX_CHARS} "
                                  f"characters (got {len(key)})")
    window = DEDUPE_WINDOW_DEFAULT_SECONDS
    if doc.get("dedupe_window_seconds") is not None:
        window = _window(doc["dedupe_window_seconds"], "dedupe_window_seconds")
    if "kind" not in job:
        raise ValidationError("kind", "is required")
    if "name" not in job:
        job["name"] = new_name(job["kind"] if isinstance(job["kind"], str) else "job")
    job["schedule"] = {"at": at}
    try:
        spec = (parser or BulkParser()).spec(job)
    except ValidationError as exc:
        raise _at_field(exc) from exc
    return EnqueueRequest(spec=spec, dedupe_key=key,
                          dedupe_window=timedelta(seconds=window))


def enqueued_run(spec: JobSpec, now: datetime) -> datetime:
    """When an enqueued job runs: its ``at``; ValidationError naming ``at`` if it is older
    than the catch-up window (it would never run)."""
    at = first_run(spec, now)
    try:
        check_runs(spec, at, now)
    except ValidationError as exc:
        raise _at_field(exc) from exc
    assert at is not None  # check_runs refuses a schedule without a run
    return at


def _at_field(exc: ValidationError) -> ValidationError:
    """A problem with ``schedule.at`` is one with the request's ``at``."""
    if exc.field in ("schedule", "schedule.at"):
        return ValidationError("at", exc.reason)
    return exc
