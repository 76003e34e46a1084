"""The job document (DESIGN §8): one JSON shape, validated once, in one place.

The REST API, the CLI, the Python client and the dashboard all pass what they receive to
``parse_job_document``; ``job_document`` writes a spec back out in canonical form. Every problem
is a ``ValidationError(field, reason)`` naming the field (a dotted path such as ``retry.jitter`` or
``tags[2]``); the first problem found, in document order, is the one raised. The parser of each
field lives in ``document.fields``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from itertools import pairwise
from typing import Any

from tickwork.document import fields as _fields
from tickwork.document.alerts import alerts
from tickwork.document.fields import (
    MEMO_PAYLOAD_CHARS,
    MEMO_SIZE,
    QUEUE_NAME,
    QUEUE_NAME_RULE,
    SELF_CHECKED,
    TAG_RULE,
    compiled_schedule,
    parse_instant,
)
from tickwork.document.text import check_strings, got, is_plain, plain_text
from tickwork.document.values import DURATION_RULE, fmt, unknown
from tickwork.errors import ValidationError
from tickwork.executors import validate_payload
from tickwork.models import Delivery, JobSpec, Overlap, RetryPolicy, ScheduleSpec, rfc3339
from tickwork.retry import worst_case_retry_span
from tickwork.schedules import for_job

__all__ = [
    "DURATION_RULE",
    "FIELDS",
    "QUEUE_NAME",
    "QUEUE_NAME_RULE",
    "TAG_RULE",
    "BulkParser",
    "ParsedJob",
    "compiled_schedule",
    "job_document",
    "parse_instant",
    "parse_job_document",
    "parse_job_spec",
]

REQUIRED = ("name", "schedule", "kind", "payload")
# Every top-level field's parser, in the order job_document writes them (``alerts`` sits in
# document/alerts.py, which builds on the field parsers).
FIELD_PARSERS = {**_fields.FIELD_PARSERS, "alerts": alerts}
FIELDS = tuple(FIELD_PARSERS)

# Fixed instant from which a cron schedule's interval is estimated, so warnings are reproducible.
_INTERVAL_REFERENCE = datetime(2030, 1, 1, tzinfo=UTC)
_INTERVAL_SAMPLES = 8


@dataclass(frozen=True, slots=True)
class ParsedJob:
    """A valid job spec and the warnings about it (advice, not errors)."""

    spec: JobSpec
    warnings: tuple[str, ...]


def parse_job_document(doc: object, *, defaults: JobSpec | None = None) -> ParsedJob:
    """Validate a job document and build its spec.

    With ``defaults`` (a partial update), fields absent from ``doc`` keep their value there; a
    field that is present replaces the old value whole (``retry``, ``schedule`` and ``payload``
    are not merged key by key).
    """
    spec = parse_job_spec(doc, defaults=defaults)
    return ParsedJob(spec=spec, warnings=_retry_warnings(spec))


def parse_job_spec(doc: object, *, defaults: JobSpec | None = None) -> JobSpec:
    """``parse_job_document(doc).spec``, without the warnings."""
    return _parse(doc, defaults, None)


class BulkParser:
    """Parses the documents of one bulk creation, each as ``parse_job_spec`` would.

    Jobs whose payloads are equal (same kind, same JSON) share one normalised payload object:
    a batch of jobs of one kind often has a single payload, and 5,000 copies of it are 5,000
    times the memory, the checks and the work of encoding it for the store.
    """

    def __init__(self) -> None:
        self._payloads: dict[tuple[str, str], dict[str, Any]] = {}

    def spec(self, doc: object) -> JobSpec:
        return _parse(doc, None, self._payloads)


def _parse(doc: object, defaults: JobSpec | None,
           shared: dict[tuple[str, str], dict[str, Any]] | None) -> JobSpec:
    if type(doc) is not dict and not isinstance(doc, Mapping):
        raise ValidationError("", f"the job document must be a JSON object ({got(doc)})")
    if defaults is None:
        values: dict[str, Any] = {"retry": _DEFAULT_RETRY}
    else:
        values = {name: getattr(defaults, name) for name in FIELDS}
    # The payload is checked against its kind once both are known, at the later of the two.
    pending = ("kind" in doc) + ("payload" in doc)
    payload_checked = False
    for key, raw in doc.items():
        parser = FIELD_PARSERS.get(key) if isinstance(key, str) else None
        if parser is None:
            raise unknown(key, FIELDS, "")
        if key not in SELF_CHECKED and not (
                plain_text(raw) if type(raw) is str else is_plain(raw)):
            check_strings(raw, key, 0)
        values[key] = parser(raw, key)
        if key in ("kind", "payload"):
            pending -= 1
            if not pending and "kind" in values and "payload" in values:
                values["payload"] = _checked_payload(values["kind"], values["payload"], shared)
                payload_checked = True
    for name in REQUIRED:
        if name not in values:
            raise ValidationError(name, "is required")
    if not payload_checked:
        values["payload"] = _checked_payload(values["kind"], values["payload"], shared)
    if values.get("max_concurrency") is not None and values.get(
            "overlap", Overlap.SKIP) is not Overlap.ALLOW_ALL:
        raise ValidationError("max_concurrency", "applies only to overlap 'allow_all' (every "
                              "other policy runs one at a time); set overlap to 'allow_all' "
                              "or leave max_concurrency out")
    return JobSpec(**values)


_DEFAULT_RETRY = RetryPolicy()  # frozen: one for every job that does not set its own


def _checked_payload(kind: str, payload: str | dict[str, Any],
                     shared: dict[tuple[str, str], dict[str, Any]] | None) -> dict[str, Any]:
    """The payload as its kind's executor normalises it.

    ``payload`` is the JSON text the document's payload parser made (checked as a fresh copy,
    detached from the caller's objects), or an update's kept payload. Executors check a payload
    as a pure function of its JSON value, so in a bulk parse (``shared``) an equal payload of
    the same kind is checked once and its normalised form shared.
    """
    if not isinstance(payload, str):
        return validate_payload(kind, payload)
    key = (kind, payload)
    known = None if shared is None else shared.get(key)
    if known is not None:
        return known
    checked = validate_payload(kind, json.loads(payload))
    if shared is not None and len(payload) <= MEMO_PAYLOAD_CHARS:
        shared[key] = checked
    return checked


def job_document(spec: JobSpec) -> dict[str, Any]:
    """The canonical, JSON-able document for ``spec``; ``parse_job_document`` reads it back."""
    retry = spec.retry
    doc = {
        "name": spec.name,
        "queue": spec.queue,
        "priority": spec.priority,
        "schedule": _schedule_document(spec.schedule),
        "kind": spec.kind,
        "payload": json.loads(json.dumps(spec.payload)),
        "retry": {
            "max_attempts": retry.max_attempts,
            "backoff_base_seconds": _number_out(retry.backoff_base_seconds),
            "backoff_max_seconds": _number_out(retry.backoff_max_seconds),
            "jitter": retry.jitter,
        },
        "timeout_seconds": _number_out(spec.timeout_seconds),
        "overlap": Overlap(spec.overlap).value,
        "catchup_window_seconds": _number_out(spec.catchup_window_seconds),
        "paused": spec.paused,
        "tags": list(spec.tags),
        "delivery": Delivery(spec.delivery).value,
        "on_success": list(spec.on_success),
        "on_failure": list(spec.on_failure),
        "on_dead": list(spec.on_dead),
    }
    if spec.alerts is not None:  # written only when set, as the store does
        doc["alerts"] = json.loads(spec.alerts)
    if spec.limit_key is not None:
        doc["limit_key"] = spec.limit_key
    if spec.max_concurrency is not None:
        doc["max_concurrency"] = spec.max_concurrency
    return doc


def _schedule_document(schedule: ScheduleSpec) -> dict[str, Any]:
    doc: dict[str, Any]
    if schedule.type == "at":
        assert schedule.at is not None  # a ScheduleSpec of type "at" always has one
        doc = {"at": rfc3339(schedule.at)}
    elif schedule.type == "cron":
        doc = {"cron": schedule.cron, "timezone": schedule.timezone}
    elif schedule.rule is not None:
        doc = {schedule.type: json.loads(schedule.rule), "timezone": schedule.timezone}
    else:
        assert schedule.every_seconds is not None  # likewise for "every"
        doc = {
            "every": _number_out(schedule.every_seconds),
            "offset": "auto" if schedule.offset_auto else _number_out(schedule.offset_seconds),
        }
    if schedule.exclude:
        doc["exclude"] = list(schedule.exclude)
    if schedule.only:
        doc["only"] = list(schedule.only)
    if (schedule.exclude or schedule.only) and "timezone" not in doc:
        doc["timezone"] = schedule.timezone
    if schedule.start_at is not None:
        doc["start_at"] = rfc3339(schedule.start_at)
    if schedule.end_at is not None:
        doc["end_at"] = rfc3339(schedule.end_at)
    if schedule.jitter_seconds:
        doc["jitter_seconds"] = _number_out(schedule.jitter_seconds)
    return doc


# --- the retry-span warning -----------------------------------------------------------------

_OVERLAP_EFFECT = {
    Overlap.SKIP: "later runs may be skipped by overlap 'skip'",
    Overlap.BUFFER_ONE: "later runs may be delayed or skipped by overlap 'buffer_one'",
    Overlap.BUFFER_ALL: "later runs may pile up behind it with overlap 'buffer_all'",
    Overlap.CANCEL_PREVIOUS: "a retrying run may be cancelled by overlap 'cancel_previous'",
    Overlap.ALLOW_ALL: "runs may overlap with overlap 'allow_all'",
}


def _retry_warnings(spec: JobSpec) -> tuple[str, ...]:
    interval = _interval_seconds(spec.schedule)
    if interval is None:
        return ()
    retry = spec.retry
    if spec.delivery == Delivery.AT_MOST_ONCE:
        retry = replace(retry, max_attempts=1)  # at_most_once never retries
    span = worst_case_retry_span(retry, spec.timeout_seconds)
    if span <= interval:
        return ()
    timeout = fmt(spec.timeout_seconds)
    if retry.max_attempts == 1:
        how = f"1 attempt of {timeout}s timeout"
    else:
        how = (
            f"{retry.max_attempts} attempts of {timeout}s timeout"
            f" with backoff up to {fmt(retry.backoff_max_seconds)}s"
        )
    return (
        f"retries can take up to {fmt(span)}s ({how}), longer than the {fmt(interval)}s"
        f" between runs; {_OVERLAP_EFFECT[Overlap(spec.overlap)]}",
    )


def _interval_seconds(schedule: ScheduleSpec) -> float | None:
    """Seconds between runs: ``every`` itself, or the smallest gap between a few cron fires."""
    if schedule.type == "every":
        return schedule.every_seconds
    if schedule.type != "cron":
        return None
    return _cron_interval(replace(schedule, start_at=None, end_at=None, jitter_seconds=0.0))


@lru_cache(maxsize=MEMO_SIZE)
def _cron_interval(bare: ScheduleSpec) -> float | None:
    compiled = compiled_schedule(bare)
    fires: list[datetime] = []
    moment: datetime | None = _INTERVAL_REFERENCE
    while moment is not None and len(fires) < _INTERVAL_SAMPLES:
        moment = compiled.next_after(moment)
        if moment is not None:
            fires.append(moment)
    gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(fires)]
    return min(gaps) if gaps else None


def _number_out(seconds: float) -> int | float:
    return int(seconds) if float(seconds).is_integer() else float(seconds)


def first_run(spec: JobSpec, now: datetime, job_id: str | None = None) -> datetime | None:
    """When a new or changed job first runs: its ``at`` time (even if just past: the catch-up
    window decides), else its first fire time from now on. ``job_id`` gives an automatic
    offset its value; without it the time is the one before any such offset (the planner
    moves it on to the job's own)."""
    schedule = compiled_schedule(spec.schedule)
    if job_id is not None:
        schedule = for_job(schedule, job_id)
    if spec.schedule.type == "at" and spec.schedule.at is not None:
        return schedule.first_at_or_after(spec.schedule.at)
    return schedule.first_at_or_after(now)


def to_spec(job: Mapping[str, Any] | JobSpec) -> JobSpec:
    return job if isinstance(job, JobSpec) else parse_job_document(job).spec


def check_runs(spec: JobSpec, next_run: datetime | None, now: datetime) -> None:
    """ValidationError when the schedule of a new or rescheduled job would never fire: an
    ``at`` older than the catch-up window, or no fire time from now on."""
    at = spec.schedule.at if spec.schedule.type == "at" else None
    if at is not None and now - at > timedelta(seconds=spec.catchup_window_seconds):
        raise ValidationError("schedule.at", (
            f"{at.isoformat()} is more than catchup_window_seconds "
            f"({spec.catchup_window_seconds:g}) in the past: the job would never run"))
    if next_run is None:
        bare = replace(spec.schedule, start_at=None, end_at=None)
        if bare.type == "cron" and compiled_schedule(bare).first_at_or_after(now) is None:
            # An expression that never fires is refused when compiled: its year field ended.
            raise ValidationError("schedule.cron", "has no fire time from now on: the years "
                                  "its year field selects are past, so the job would never run")
        raise ValidationError("schedule", "has no fire time from now on (see its end_at): "
                              "the job would never run")
