"""JSON Schemas for the OpenAPI document.

Documentation only: request bodies are validated by ``tickwork.document`` (the one validator),
so the API's errors are the CLI's. The schemas say what a client should send and what it gets.
"""

from __future__ import annotations

from typing import Any

from tickwork.models import KINDS, OccurrenceState, Overlap

_DURATION: dict[str, Any] = {"oneOf": [{"type": "number", "minimum": 0},
                                       {"type": "string", "example": "15m"}]}
_INSTANT: dict[str, Any] = {"type": "string", "format": "date-time"}

_TIMES: dict[str, Any] = {"oneOf": [{"type": "string", "example": "09:00"},
                                    {"type": "array", "items": {"type": "string"}}]}
_NAMES: dict[str, Any] = {"type": "array", "maxItems": 10,
                          "items": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}}
SCHEDULE: dict[str, Any] = {
    "type": "object",
    "description": "Exactly one of at, cron, every, weekly or monthly; exclude and only name "
                   "calendars; see docs/schedules.md.",
    "properties": {
        "weekly": {"type": "object", "additionalProperties": False, "properties": {
            "days": {"type": "array", "items": {"type": "string", "example": "tue"}},
            "at": _TIMES, "interval": {"type": "integer", "minimum": 1, "maximum": 52},
            "anchor": {"type": "string", "format": "date"}}},
        "monthly": {"type": "object", "additionalProperties": False, "properties": {
            "days": {"type": "array", "items": {"oneOf": [{"type": "integer"},
                                                          {"type": "string", "enum": ["last"]}]}},
            "business_day": {"type": "integer", "minimum": -23, "maximum": 23},
            "business_days_before_end": {"type": "integer", "minimum": 1, "maximum": 22},
            "at": _TIMES}},
        "exclude": _NAMES, "only": _NAMES,
        "at": _INSTANT, "cron": {"type": "string", "example": "0 3 * * *"},
        "timezone": {"type": "string", "example": "Europe/Berlin"}, "every": _DURATION,
        "offset": _DURATION, "start_at": {**_INSTANT, "nullable": True},
        "end_at": {**_INSTANT, "nullable": True}, "jitter_seconds": _DURATION,
    },
    "additionalProperties": False,
}

_FIELDS: dict[str, Any] = {
    "name": {"type": "string", "minLength": 1, "maxLength": 200},
    "queue": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
    "priority": {"type": "integer", "minimum": -1000, "maximum": 1000},
    "schedule": SCHEDULE,
    "kind": {"type": "string", "enum": list(KINDS)},
    "payload": {"type": "object"},
    "retry": {"type": "object", "additionalProperties": False, "properties": {
        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 100},
        "backoff_base_seconds": _DURATION, "backoff_max_seconds": _DURATION,
        "jitter": {"type": "string", "enum": ["full", "equal", "none"]}}},
    "timeout_seconds": _DURATION,
    "overlap": {"type": "string", "enum": [o.value for o in Overlap]},
    "catchup_window_seconds": _DURATION,
    "paused": {"type": "boolean"},
    "tags": {"type": "array", "maxItems": 20, "items": {"type": "string"}},
    "delivery": {"type": "string", "enum": ["at_least_once", "at_most_once"]},
    **{f"on_{event}": {"type": "array", "maxItems": 20,
                       "items": {"type": "string", "minLength": 1, "maxLength": 200},
                       "description": f"names of jobs to trigger when a run ends: {event}"}
       for event in ("success", "failure", "dead")},
    "limit_key": {"type": ["string", "null"], "pattern": "^[A-Za-z0-9_.-]{1,64}$",
                  "description": "a named limit this job's starts count against "
                                 "(docs/limits.md)"},
    "max_concurrency": {"type": ["integer", "null"], "minimum": 1, "maximum": 100_000,
                        "description": "overlap allow_all: at most this many runs at once"},
}

JOB_DOCUMENT: dict[str, Any] = {
    "type": "object", "required": ["name", "schedule", "kind", "payload"],
    "properties": _FIELDS, "additionalProperties": False,
    "example": {"name": "nightly-report", "schedule": {"cron": "0 3 * * *",
                                                       "timezone": "Europe/Berlin"},
                "kind": "http", "payload": {"url": "https://example.org/hook"}},
}
JOB_CHANGES: dict[str, Any] = {"type": "object", "properties": _FIELDS,
                               "additionalProperties": False,
                               "example": {"paused": True, "tags": ["reports"]}}


def body(schema: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` for an operation whose JSON body has this schema."""
    return {"requestBody": {"required": True,
                            "content": {"application/json": {"schema": schema}}}}


CREATE_BODY = body({"oneOf": [JOB_DOCUMENT, {"type": "array", "items": JOB_DOCUMENT,
                                             "minItems": 1, "maxItems": 1000}]})
PATCH_BODY = body(JOB_CHANGES)
PREVIEW_BODY = body({
    "type": "object", "required": ["schedule"], "additionalProperties": False,
    "properties": {"schedule": SCHEDULE, "count": {"type": "integer", "minimum": 1,
                                                   "maximum": 100},
                   "after": _INSTANT},
    "example": {"schedule": {"cron": "*/15 9-17 * * 1-5", "timezone": "Europe/Berlin"},
                "count": 5}})
BACKFILL_BODY = body({
    "type": "object", "required": ["from", "to"], "additionalProperties": False,
    "properties": {"from": _INSTANT, "to": _INSTANT,
                   "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                   "overlap": {"type": "string", "enum": [o.value for o in Overlap],
                               "description": "the overlap policy the new runs are claimed "
                               "under; left out: the job's own"},
                   "dry_run": {"type": "boolean", "default": False,
                               "description": "preview: say what would be created, create "
                               "nothing"}},
    "example": {"from": "2030-01-01T00:00:00Z", "to": "2030-01-02T00:00:00Z",
                "overlap": "allow_all", "dry_run": True}})
TOKEN_BODY = body({
    "type": "object", "required": ["name", "scope"], "additionalProperties": False,
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 64},
                   "scope": {"type": "string", "enum": ["read", "write", "admin"]},
                   "namespace": {"type": "string", "pattern": "^[a-z0-9]([a-z0-9_.-]{0,61}"
                                 "[a-z0-9])?$"}}})

QUOTAS_BODY = body({
    "type": "object", "additionalProperties": False,
    "properties": {q: {"type": ["integer", "null"], "minimum": 0}
                   for q in ("max_jobs", "max_runs_per_hour", "max_payload_bytes")}})

_DATE: dict[str, Any] = {"type": "string", "format": "date", "example": "2030-12-25"}
CALENDAR_DOCUMENT: dict[str, Any] = {
    "type": "object", "required": ["name"], "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
        "description": {"type": "string", "maxLength": 500},
        "dates": {"type": "array", "items": {"oneOf": [_DATE, {
            "type": "object", "required": ["from", "to"], "additionalProperties": False,
            "properties": {"from": _DATE, "to": _DATE}}]}},
        "yearly": {"type": "array", "items": {"oneOf": [
            {"type": "string", "example": "12-25"},
            {"type": "object", "required": ["on"], "additionalProperties": False,
             "properties": {"on": {"type": "string"}, "from": _DATE, "until": _DATE}}]}},
        "weekly": {"type": "array", "items": {"type": "string", "example": "Sat-Sun"}},
    },
    "example": {"name": "holidays", "dates": ["2030-12-25", {"from": "2030-08-01",
                                                             "to": "2030-08-15"}],
                "yearly": ["01-01"], "weekly": ["Sat-Sun"]},
}
CALENDAR_BODY = body(CALENDAR_DOCUMENT)
CALENDAR_UPDATE_BODY = body({**CALENDAR_DOCUMENT, "required": []})
CALENDAR_IMPORT_BODY = body({
    "type": "object", "required": ["name", "ics"], "additionalProperties": False,
    "properties": {"name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
                   "ics": {"type": "string", "description": "the text of an .ics file"},
                   "description": {"type": "string", "maxLength": 500},
                   "replace": {"type": "boolean", "default": False}}})

STATES = [s.value for s in OccurrenceState]

_ENQUEUE_FIELDS: dict[str, Any] = {
    **{k: v for k, v in _FIELDS.items() if k != "schedule"},
    "at": {**_INSTANT, "nullable": True, "description": "when it runs; default: now"},
    "dedupe_key": {"type": "string", "minLength": 1, "maxLength": 200,
                   "description": "an enqueue with a key held by a job (within its window) "
                                  "returns that job instead of creating one"},
    "dedupe_window_seconds": {**_DURATION, "description": "how long the key is held; "
                                                          "default 3600"},
}
ENQUEUE_REQUEST: dict[str, Any] = {
    "type": "object", "required": ["kind", "payload"], "properties": _ENQUEUE_FIELDS,
    "additionalProperties": False,
    "example": {"kind": "http", "payload": {"method": "POST", "url": "https://example.org/hook",
                                            "body": {"order": 42}},
                "dedupe_key": "receipt-42"},
}
ENQUEUE_BODY = body(ENQUEUE_REQUEST)
ENQUEUE_BULK_BODY = body({"type": "array", "items": ENQUEUE_REQUEST, "minItems": 1,
                          "maxItems": 1000})
_RATE = {"type": ["string", "null"],
         "pattern": r"^\s*\d+\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$",
         "description": "N/s, N/min or N/h (docs/limits.md)", "examples": ["50/s"]}
_COUNT = {"type": ["integer", "null"], "minimum": 1, "maximum": 1_000_000}
_OWNER = {"type": ["string", "null"], "description": "the namespace that owns it from now on "
          "(null: shared by every namespace; absent: the owner stays). Only a token without "
          "a namespace changes it."}
QUEUE_LIMITS_BODY = body({
    "type": "object", "additionalProperties": False,
    "properties": {"max_running": _COUNT, "rate": _RATE, "burst": _COUNT,
                   "namespace": _OWNER}})
KEY_LIMIT_BODY = body({
    "type": "object", "additionalProperties": False, "required": ["rate"],
    "properties": {"rate": {**_RATE, "type": "string"}, "burst": _COUNT,
                   "namespace": _OWNER}})
