"""Fault suite, targets: a webhook that hangs and one that trickles bytes. The attempt times out
and is retried; the worker's other jobs run on time meanwhile."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from tickwork.models import rfc3339
from tickwork.testing.faults.run import FaultRun, full, next_second
from tickwork.testing.faults.webhook import MisbehavingTarget

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]


async def test_a_hanging_or_trickling_webhook_times_out_and_stalls_nothing(
    tmp_path: Path, postgres_url: str,
) -> None:
    window = 20 if full() else 8
    async with FaultRun(tmp_path, postgres_url, name="hanging and trickling webhooks") as run:
        target = MisbehavingTarget(run.ledger)
        url = await target.start()
        try:
            s1, w1 = run.scheduler("s1"), run.worker("w1", "default:8")
            await run.start(s1, w1)
            t0 = next_second(after=2)
            tick = {"cron": "* * * * * *", "start_at": rfc3339(t0),
                    "end_at": rfc3339(t0 + timedelta(seconds=window - 0.5))}
            bad = [{"name": f"{mode}-{i}", "kind": "http", "timeout_seconds": 1,
                    "schedule": {"at": rfc3339(t0 + timedelta(seconds=1 + i))},
                    "payload": {"method": "POST", "url": f"{url}/{mode}", "body": {}},
                    "retry": {"max_attempts": 2, "backoff_base_seconds": 0.2}}
                   for mode in ("hang", "trickle") for i in range(2)]
            jobs = await run.create([*bad, *(run.doc(f"tick-{i}", tick, overlap="allow_all")
                                             for i in range(4))])
            run.expect(jobs, t0, t0 + timedelta(seconds=window))
            await run.settle(run.all_done, within=window + 15)

            async def bad_ones_dead() -> bool:
                states = await run.final_states()
                return sum(s == "dead" for s in states.values()) == len(bad)

            await run.settle(bad_ones_dead, within=15, what="the bad webhooks to end dead")
            assert await asyncio.gather(run.stop_cleanly(s1), run.stop_cleanly(w1)) == [0, 0]
        finally:
            await target.stop()
        report = await run.check()
    assert len(report.retried) == len(bad)
    assert target.requests == 2 * len(bad)
    lateness = [e.started - e.scheduled_at for e in run.executions()
                if e.occurrence.startswith("tick-")]
    print(f"  tick lateness while webhooks hung: max {max(lateness):.3f}s")
    assert max(lateness) < 1.0, "a hanging target stalled the worker's other jobs"
