"""The bench's no-op job and the record it writes: what it notes is what the bench reads."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tickwork.bench import jobs
from tickwork.bench.record import RecordReader
from tickwork.executors.base import ExecutionContext


def _context(scheduled_at: datetime, attempt: int = 2) -> ExecutionContext:
    return ExecutionContext(
        job_id="j1", job_name="w1-1", kind="python", payload={}, scheduled_at=scheduled_at,
        attempt=attempt, max_attempts=3, idempotency_key="j1:key", deadline=scheduled_at,
        timeout_seconds=30.0)


def test_instants_are_whole_microseconds_since_the_epoch() -> None:
    at = datetime(2026, 11, 27, 19, 30, 0, 123456, tzinfo=UTC)
    assert jobs.micros(at) == int(at.timestamp()) * 1_000_000 + 123456
    assert jobs.micros(at.replace(tzinfo=None)) == jobs.micros(at)  # naive is UTC
    assert jobs.micros(datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)) == -1
    assert jobs.record_line("k", 1, 5, 7) == "k\t1\t5\t7\n"


async def test_what_the_job_notes_the_reader_reads_back(tmp_path: Path) -> None:
    scheduled = datetime.now(UTC).replace(microsecond=654321) - timedelta(seconds=1)
    before = time.time()
    await jobs.noop(_context(scheduled), str(tmp_path))
    after = time.time()
    jobs.writer_for(str(tmp_path)).flush()
    await asyncio.sleep(0)
    (execution,) = RecordReader(tmp_path).poll()
    assert (execution.key, execution.attempt) == ("j1:key", 2)
    assert abs(execution.scheduled - scheduled.timestamp()) < 1e-6
    assert before - 1e-6 <= execution.started <= after + 1e-6
