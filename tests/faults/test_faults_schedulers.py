"""Fault suite, schedulers and outages (PostgreSQL deployment): kill -9 of a scheduler while it
plans many jobs (with the default settings: the survivor takes its shards over within seconds),
a scheduler frozen past its shard lease and resumed (a zombie), and an outage of every worker
longer than the catch-up window.

CI-sized by default; TICKWORK_FAULTS_FULL=1 runs more jobs.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.config import Settings
from tickwork.models import rfc3339
from tickwork.testing.faults.run import FaultRun, full, next_second, until_then

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]

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


DEFAULTS = Settings()
# After a kill -9 the survivor takes the dead one's shards once their leases lapse: by a shard
# lease plus one renewal pass (a third of it), and plans them at its next planner tick. Until
# then the dead one's jobs run from what it planned ahead (the horizon), so an occurrence is
# late by at most about 3.7 s with the defaults; 2 s more for a worker's pickup on a busy box.
# (With the 30 s run lease as the shard lease, as before, it was late by 20-27 s.)
FAILOVER_BOUND = (DEFAULTS.shard_lease_seconds * 4 / 3 + DEFAULTS.planner_interval_seconds
                  - DEFAULTS.planner_horizon_seconds + 2)


async def test_kill_9_of_a_scheduler_mid_plan_with_the_defaults_fails_over_in_seconds(
    tmp_path: Path, postgres_url: str,
) -> None:
    async with FaultRun(tmp_path, postgres_url, name="kill -9 scheduler mid-plan",
                        defaults=True) as run:
        s1, s2 = run.scheduler("s1"), run.scheduler("s2")
        w1, w2 = run.worker("w1", "default:16"), run.worker("w2", "default:16")
        await run.start(s1, s2, w1, w2)
        t0 = next_second(after=3)
        # Long enough past the kill (at most t0 + 4) for occurrences beyond what s1 planned
        # ahead before it died: those wait for s2 to take its shards over.
        window = 16
        jobs = await run.create(spread(run, t0, SPREAD, window) + ticks(run, t0, window))
        run.expect(jobs, t0, t0 + timedelta(seconds=window))
        await run.pause(until_then(t0) + run.rng.uniform(-2, 4))  # mid-plan
        kill = run.kill9(s1)
        await run.settle(run.all_done, within=window + 15)
        codes = await asyncio.gather(*(run.stop_cleanly(p) for p in (s2, w1, w2)))
        assert codes == [0, 0, 0]
        report = await run.check()
    assert report.explained == []
    took = s2.seen_at("s2 now holds 64 shards", after=kill.at)
    assert took is not None, "s2 took s1's shards"
    assert took - kill.at < DEFAULTS.shard_lease_seconds * 4 / 3 + 1
    [recovery] = report.recoveries
    assert recovery.lateness is not None
    assert recovery.lateness < FAILOVER_BOUND, (
        f"lateness after the kill {recovery.lateness:.2f}s, over {FAILOVER_BOUND:.2f}s")


async def test_a_frozen_scheduler_resumed_past_its_lease_plans_nothing_twice(
    tmp_path: Path, postgres_url: str,
) -> None:
    async with FaultRun(tmp_path, postgres_url, name="zombie scheduler") as run:
        s1, s2 = run.scheduler("s1"), run.scheduler("s2")
        w1 = run.worker("w1", "default:16")
        await run.start(s1, s2, w1)
        t0 = next_second(after=3)
        window = 16
        jobs = await run.create(spread(run, t0, SPREAD // 2, window) + ticks(run, t0, window))
        run.expect(jobs, t0, t0 + timedelta(seconds=window))
        await run.pause(until_then(t0) + run.rng.uniform(0, 3))
        # Frozen past its shard lease and s2's next pass after it, s1's shards go to s2;
        # resumed, it must not plan them again.
        await run.freeze(s1, DEFAULTS.shard_lease_seconds * 4 / 3 + 1.5)
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
