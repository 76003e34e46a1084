"""Fault suite, load: occurrences all due in one second on PostgreSQL with two workers (CI:
10,000; TICKWORK_FAULTS_FULL=1: 100,000); none lost, none run twice."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from tickwork.models import rfc3339
from tickwork.testing.faults.run import FaultRun, full, next_second

pytestmark = [pytest.mark.faults, pytest.mark.timeout(600 if full() else 120)]


async def test_a_burst_due_in_one_second_runs_exactly_once(tmp_path: Path,
                                                            postgres_url: str) -> None:
    n = 100_000 if full() else 10_000
    async with FaultRun(tmp_path, postgres_url, name=f"burst of {n:,}") as run:
        s1 = run.scheduler("s1")
        w1, w2 = run.worker("w1", "default:64"), run.worker("w2", "default:64")
        await run.start(s1, w1, w2)
        t0 = next_second(after=2)
        jobs = await run.create([run.doc(f"b-{i:06d}", {"at": rfc3339(
            t0 + timedelta(seconds=i / n))}) for i in range(n)], chunk=5000)
        run.expect(jobs, t0, t0 + timedelta(seconds=1))
        took = await run.settle(run.all_done, within=500 if full() else 90)
        print(f"  drained {n:,} in {took:.1f}s after creation")
        codes = await asyncio.gather(*(run.stop_cleanly(p) for p in (s1, w1, w2)))
        assert codes == [0, 0, 0]
        report = await run.check(explained_budget=0)
    assert len(report.ok) == n
