"""Fault suite, embedded deployment: kill -9 of ``tickwork run`` (SQLite) while jobs are being
created and run, then a restart: nothing that was created is lost."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from tickwork.models import Job, rfc3339
from tickwork.testing.faults.run import FaultRun, full, next_second, now

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]


async def test_kill_9_of_the_embedded_service_during_writes(tmp_path: Path) -> None:
    batches = 40 if full() else 15
    async with FaultRun(tmp_path, f"sqlite:///{tmp_path}/tickwork.db",
                        name="kill -9 tickwork run during writes") as run:
        first = run.service("svc-1", "default:8")
        await run.start(first)
        t0 = next_second(after=1)
        end = t0 + timedelta(seconds=batches * 0.3 + 5.5)
        tick = {"cron": "* * * * * *", "start_at": rfc3339(t0), "end_at": rfc3339(end)}
        created: list[Job] = await run.create(
            [run.doc(f"tick-{i}", tick, sleep=0.5, overlap="allow_all") for i in range(3)])

        async def burst() -> None:  # jobs keep being created while the service dies
            for b in range(batches):
                due = now() + timedelta(seconds=1 + run.rng.random())
                created.extend(await run.create([
                    run.doc(f"burst-{b:03d}-{i:02d}", {"at": rfc3339(due)}, sleep=0.2)
                    for i in range(20)]))
                await run.pause(0.3)  # the pace of the writer, not a wait for a condition

        writer = asyncio.create_task(burst())
        await run.pause(run.rng.uniform(1.5, batches * 0.3 - 1))
        run.kill9(first)
        await run.pause(2)  # the outage
        await run.start(run.service("svc-2", "default:8"))
        await writer
        # every burst job is due by now + 5 s
        run.expect(created, t0 - timedelta(seconds=5), max(end, now() + timedelta(seconds=5)))
        await run.settle(run.all_done, within=40)
        assert await run.stop_cleanly(run.procs[-1]) == 0
        await run.check()
