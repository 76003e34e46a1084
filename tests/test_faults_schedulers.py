"""Fault suite, schedulers and outages (PostgreSQL deployment): kill -9 of a scheduler while it
plans many jobs, a scheduler frozen past its shard lease and resumed (a zombie), and an outage
of every worker longer than the catch-up window.

CI-sized by default; TICKWORK_FAULTS_FULL=1 runs more jobs.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.models import rfc3339
from tickwork.testing import postgres as pg
from tickwork.testing.faults.run import FaultRun, full, next_second, until_then

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]
postgres_template = pg.postgres_template
postgres_url = pg.postgres_url

SPREAD = 3000 if full() else 1200  # one-off jobs spread over the window: the planner is busy


def spread(run: FaultRun, t0: datetime, n: int, seconds: int) -> list[dict[str, Any]]:
    """``n`` one-off jobs due across ``seconds`` from ``t0``, 100 ms apart in turn."""
    return [run.doc(f"once-{i:05d}", {"at": rfc3339(t0 + timedelta(
        seconds=(i * 0.1) % seconds))}) for i in range(n)]


def ticks(run: FaultRun, t0: datetime, window: int, n: int = 4,
          **extra: Any) -> list[dict[str, Any]]:
    schedule = {"cron": "* * * * * *", "start_at": rfc3339(t0),
                "end_at": rfc3339(t0 + timedelta(seconds=window - 0.5))}
    return [run.doc(f"tick-{i}", schedule, overlap="allow_all", **extra) for i in range(n)]


async def test_kill_9_of_a_scheduler_mid_plan(tmp_path: Path, postgres_url: str) -> None:
    async with FaultRun(tmp_path, postgres_url, name="kill -9 scheduler mid-plan") as run:
        s1, s2 = run.scheduler("s1"), run.scheduler("s2")
        w1, w2 = run.worker("w1", "default:16"), run.worker("w2", "default:16")
        await run.start(s1, s2, w1, w2)
        t0 = next_second(after=3)
        window = 10
        jobs = await run.create(spread(run, t0, SPREAD, window) + ticks(run, t0, window))
        run.expect(jobs, t0, t0 + timedelta(seconds=window))
        await run.pause(until_then(t0) + run.rng.uniform(-2, window / 2))  # mid-plan
        run.kill9(s1)
        await run.settle(run.all_done, within=40)
        codes = await asyncio.gather(*(run.stop_cleanly(p) for p in (s2, w1, w2)))
        assert codes == [0, 0, 0]
        report = await run.check()
    assert report.explained == []
    assert any("s2 now holds 64 shards" in line for line in s2.lines), "s2 took s1's shards"


async def test_a_frozen_scheduler_resumed_past_its_lease_plans_nothing_twice(
    tmp_path: Path, postgres_url: str,
) -> None:
    async with FaultRun(tmp_path, postgres_url, name="zombie scheduler") as run:
        s1, s2 = run.scheduler("s1"), run.scheduler("s2")
        w1 = run.worker("w1", "default:16")
        await run.start(s1, s2, w1)
        t0 = next_second(after=3)
        window = 14
        jobs = await run.create(spread(run, t0, SPREAD // 2, window) + ticks(run, t0, window))
        run.expect(jobs, t0, t0 + timedelta(seconds=window))
        await run.pause(until_then(t0) + run.rng.uniform(0, 3))
        # lease 2 s: frozen for 5 s, its shards go to s2; resumed, it must not plan them again
        await run.freeze(s1, 5)
        await run.settle(run.all_done, within=40)
        codes = await asyncio.gather(*(run.stop_cleanly(p) for p in (s1, s2, w1)))
        assert codes == [0, 0, 0]
        report = await run.check(explained_budget=0)
    assert any("s2 now holds 64 shards" in line for line in s2.lines), "s2 took over"
    assert report.recoveries[0].seconds is not None


async def test_an_outage_longer_than_the_catchup_window_ends_missed(
    tmp_path: Path, postgres_url: str,
) -> None:
    outage = 8 if full() else 5
    async with FaultRun(tmp_path, postgres_url, name="outage past the catch-up window") as run:
        s1, w1 = run.scheduler("s1"), run.worker("w1", "default:8")
        await run.start(s1, w1)
        t0 = next_second(after=2)
        window = outage + 8
        jobs = await run.create(ticks(run, t0, window, catchup_window_seconds=2))
        run.expect(jobs, t0, t0 + timedelta(seconds=window))
        await run.pause(until_then(t0) + run.rng.uniform(1, 3))
        assert await run.stop_cleanly(w1) == 0  # every worker stops; the scheduler plans on
        run.record(f"outage {outage}s", w1, w1.exited_at or 0.0)
        await run.pause(outage)
        w2 = run.worker("w2", "default:8")
        await run.start(w2)

        async def settled() -> bool:
            states = await run.final_states()
            return len(states) == len(run.expected) and all(
                s in ("succeeded", "missed") for s in states.values())

        await run.settle(settled, within=window + 15, what="every tick to run or be missed")
        assert await asyncio.gather(run.stop_cleanly(s1), run.stop_cleanly(w2)) == [0, 0]
        report = await run.check()
    missed = report.accounted.get("missed", [])
    assert len(missed) >= 4 * (outage - 3), "the outage's ticks are marked missed, not lost"
    assert len(report.ok) + len(missed) == report.expected
