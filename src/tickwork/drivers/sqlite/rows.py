"""Conversions between SQLite rows and models. Instants are integer microseconds, UTC."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

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

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ONE_US = timedelta(microseconds=1)


def to_us(dt: datetime) -> int:
    return (dt - EPOCH) // ONE_US


def to_us_or_none(dt: datetime | None) -> int | None:
    return None if dt is None else to_us(dt)


def from_us(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


def from_us_or_none(value: int | None) -> datetime | None:
    return None if value is None else from_us(value)


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


def job_from_row(row: sqlite3.Row, specs: SpecCache) -> Job:
    return Job(
        id=row["id"],
        spec=specs.get(row["id"], row["version"], row["spec"]),
        next_run_at=from_us_or_none(row["next_run_at"]),
        created_at=from_us(row["created_at"]),
        updated_at=from_us(row["updated_at"]),
        shard=row["shard"],
    )


def occurrence_from_row(row: sqlite3.Row) -> Occurrence:
    scheduled_at = from_us(row["scheduled_at"])
    trigger = Trigger(row["trigger"])
    return Occurrence(
        job_id=row["job_id"],
        scheduled_at=scheduled_at,
        due_at=from_us(row["due_at"]),
        queue=row["queue"],
        priority=row["priority"],
        state=OccurrenceState(row["state"]),
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        trigger=trigger,
        idempotency_key=idempotency_key(row["job_id"], scheduled_at, trigger),
        created_at=from_us(row["created_at"]),
        updated_at=from_us(row["updated_at"]),
        lease_until=from_us_or_none(row["lease_until"]),
        worker=row["worker"],
        finished_at=from_us_or_none(row["finished_at"]),
        last_error=row["last_error"],
    )


def attempt_from_row(row: sqlite3.Row) -> Attempt:
    return Attempt(
        job_id=row["job_id"],
        scheduled_at=from_us(row["scheduled_at"]),
        number=row["number"],
        worker=row["worker"],
        queued_at=from_us(row["queued_at"]),
        claimed_at=from_us(row["claimed_at"]),
        started_at=from_us_or_none(row["started_at"]),
        finished_at=from_us_or_none(row["finished_at"]),
        outcome=AttemptOutcome(row["outcome"]) if row["outcome"] else None,
        output=row["output"],
        error=row["error"],
    )
