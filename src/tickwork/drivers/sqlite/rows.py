"""Conversions between SQLite rows and models. Instants are integer microseconds, UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tickwork.drivers.rows import RowReader

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


_read = RowReader(from_us)
job_from_row = _read.job
job_shown = _read.job_shown
occurrence_from_row = _read.occurrence
attempt_from_row = _read.attempt
