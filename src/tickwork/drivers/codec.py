"""Stored form of a JobSpec: JSON, written after validation and read back without it.

The store trusts what it wrote; validation of user input happens once, in ``document.py``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from tickwork.models import Delivery, JobSpec, Overlap, RetryPolicy, ScheduleSpec


def _instant(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def spec_to_json(spec: JobSpec) -> str:
    s = spec.schedule
    return json.dumps({
        "name": spec.name,
        "schedule": {
            "type": s.type,
            "at": s.at.isoformat() if s.at else None,
            "cron": s.cron,
            "timezone": s.timezone,
            "every_seconds": s.every_seconds,
            "offset_seconds": s.offset_seconds,
            "start_at": s.start_at.isoformat() if s.start_at else None,
            "end_at": s.end_at.isoformat() if s.end_at else None,
            "jitter_seconds": s.jitter_seconds,
        },
        "kind": spec.kind,
        "payload": spec.payload,
        "queue": spec.queue,
        "priority": spec.priority,
        "retry": {
            "max_attempts": spec.retry.max_attempts,
            "backoff_base_seconds": spec.retry.backoff_base_seconds,
            "backoff_max_seconds": spec.retry.backoff_max_seconds,
            "jitter": spec.retry.jitter,
        },
        "timeout_seconds": spec.timeout_seconds,
        "overlap": spec.overlap.value,
        "catchup_window_seconds": spec.catchup_window_seconds,
        "paused": spec.paused,
        "tags": list(spec.tags),
        "delivery": spec.delivery.value,
    }, separators=(",", ":"))


def spec_from_json(text: str) -> JobSpec:
    d: dict[str, Any] = json.loads(text)
    s = d["schedule"]
    return JobSpec(
        name=d["name"],
        schedule=ScheduleSpec(
            type=s["type"],
            at=_instant(s["at"]),
            cron=s["cron"],
            timezone=s["timezone"],
            every_seconds=s["every_seconds"],
            offset_seconds=s["offset_seconds"],
            start_at=_instant(s["start_at"]),
            end_at=_instant(s["end_at"]),
            jitter_seconds=s["jitter_seconds"],
        ),
        kind=d["kind"],
        payload=d["payload"],
        queue=d["queue"],
        priority=d["priority"],
        retry=RetryPolicy(**d["retry"]),
        timeout_seconds=d["timeout_seconds"],
        overlap=Overlap(d["overlap"]),
        catchup_window_seconds=d["catchup_window_seconds"],
        paused=d["paused"],
        tags=tuple(d["tags"]),
        delivery=Delivery(d["delivery"]),
    )
