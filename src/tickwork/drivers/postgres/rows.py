"""Conversions between PostgreSQL rows (dicts) and models."""

from __future__ import annotations

import zlib
from datetime import UTC, datetime
from typing import Any

from tickwork.drivers.rows import RowReader

Row = dict[str, Any]
DEFAULT_SHARD_COUNT = 64


def shard_of(job_id: str, shard_count: int) -> int:
    """A job's shard: a stable hash of its id, so every process computes the same one."""
    return zlib.crc32(job_id.encode()) % shard_count


def instant(value: datetime) -> datetime:
    # Sessions run with TimeZone = UTC, so psycopg hands back UTC already: keep it as it is.
    return value if value.tzinfo is UTC else value.astimezone(UTC)


def instant_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else instant(value)


_read = RowReader(instant)
job_from_row = _read.job
job_shown = _read.job_shown
occurrence_from_row = _read.occurrence
occurrence_claimed = _read.claimed
attempt_from_row = _read.attempt
