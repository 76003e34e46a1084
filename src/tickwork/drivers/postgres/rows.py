"""Conversions between PostgreSQL rows (dicts) and models."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime
from typing import Any

from tickwork.drivers.codec import spec_from_json
from tickwork.models import (
    Attempt,
    AttemptOutcome,
    Job,
    JobSpec,
    Occurrence,
    OccurrenceState,
    Trigger,
    idempotency_key,
)

Row = dict[str, Any]
DEFAULT_SHARD_COUNT = 64


def shard_of(job_id: str, shard_count: int) -> int:
    """A job's shard: a stable hash of its id, so every process computes the same one."""
    return zlib.crc32(job_id.encode()) % shard_count


def instant(value: datetime) -> datetime:
    return value.astimezone(UTC)


def instant_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


class SpecCache:
    """Parsed job specs by (job id, version): claims read the same jobs over and over."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._specs: dict[tuple[str, int], JobSpec] = {}

    def get(self, job_id: str, version: int, text: str) -> JobSpec:
        key = (job_id, version)
        spec = self._specs.get(key)
        if spec is None:
            if len(self._specs) >= self._size:
                self._specs.clear()
            spec = self._specs[key] = spec_from_json(text)
        return spec


def job_from_row(row: Row, specs: SpecCache) -> Job:
    return Job(
        id=row["id"],
        spec=specs.get(row["id"], row["version"], row["spec"]),
        next_run_at=instant_or_none(row["next_run_at"]),
        created_at=instant(row["created_at"]),
        updated_at=instant(row["updated_at"]),
        shard=row["shard"],
    )


def occurrence_from_row(row: Row) -> Occurrence:
    scheduled_at = instant(row["scheduled_at"])
    trigger = Trigger(row["trigger"])
    return Occurrence(
        job_id=row["job_id"],
        scheduled_at=scheduled_at,
        due_at=instant(row["due_at"]),
        queue=row["queue"],
        priority=row["priority"],
        state=OccurrenceState(row["state"]),
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        trigger=trigger,
        idempotency_key=idempotency_key(row["job_id"], scheduled_at, trigger),
        created_at=instant(row["created_at"]),
        updated_at=instant(row["updated_at"]),
        lease_until=instant_or_none(row["lease_until"]),
        worker=row["worker"],
        finished_at=instant_or_none(row["finished_at"]),
        last_error=row["last_error"],
    )


def attempt_from_row(row: Row) -> Attempt:
    return Attempt(
        job_id=row["job_id"],
        scheduled_at=instant(row["scheduled_at"]),
        number=row["number"],
        worker=row["worker"],
        queued_at=instant(row["queued_at"]),
        claimed_at=instant(row["claimed_at"]),
        started_at=instant_or_none(row["started_at"]),
        finished_at=instant_or_none(row["finished_at"]),
        outcome=AttemptOutcome(row["outcome"]) if row["outcome"] else None,
        output=row["output"],
        error=row["error"],
    )
