"""Fault suite, workers (PostgreSQL deployment): kill -9 mid-job, failpoints, SIGTERM, a poison
job, a skewed clock. Judged by tickwork.testing.faults from a ledger the jobs write.

CI-sized by default; TICKWORK_FAULTS_FULL=1 runs longer windows and more jobs.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

import pytest

from tickwork.models import rfc3339
from tickwork.testing.faults import ledger
from tickwork.testing.faults.procs import FAKETIME_LIB
from tickwork.testing.faults.run import FaultRun, full, next_second, until_then

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]

WINDOW = 30 if full() else 8  # seconds of one-second ticks
TICKS = 20 if full() else 6  # jobs ticking every second


def ticks(run: FaultRun, t0: object, *, sleep: float = 0.3, n: int = TICKS,
          window: int = WINDOW, **extra: object) -> list[dict[str, object]]:
    """``n`` jobs firing every second for ``window`` seconds from ``t0``; allow_all, so a tick
    behind a killed one still runs (the test asks for delivery, not for overlap handling)."""
    schedule = {"cron": "* * * * * *", "start_at": rfc3339(t0),  # type: ignore[arg-type]
                "end_at": rfc3339(t0 + timedelta(seconds=window - 0.5))}  # type: ignore[operator]
    return [run.doc(f"tick-{i:02d}", schedule, sleep=sleep, overlap="allow_all",
                    timeout_seconds=2, **extra) for i in range(n)]


def in_flight_on(run: FaultRun, worker: str) -> bool:
    return any(r.worker == worker and r.outcome is None for r in ledger.read(run.ledger))


async def test_kill_9_of_a_worker_mid_job(tmp_path: Path, postgres_url: str) -> None:
    async with FaultRun(tmp_path, postgres_url, name="kill -9 worker mid-job") as run:
        s1 = run.scheduler("s1")
        w1, w2 = run.worker("w1", "default:4"), run.worker("w2", "default:4")
        await run.start(s1, w1, w2)
        t0 = next_second(after=2)
        jobs = await run.create(ticks(run, t0, sleep=0.8))
        run.expect(jobs, t0, t0 + timedelta(seconds=WINDOW))
        await run.pause(until_then(t0) + run.rng.uniform(1, WINDOW / 2))
        await run.settle(lambda: in_flight_on(run, "w1"), within=10, what="a job running on w1")
        run.kill9(w1)
        await run.settle(run.all_settled, within=40)
        assert await asyncio.gather(run.stop_cleanly(s1), run.stop_cleanly(w2)) == [0, 0]
        report = await run.check()
    assert report.explained, "the job running on w1 ran again, as attempt 2"


@pytest.mark.parametrize(("point", "spec"), [
    ("after_execute", "after_execute=kill@3"),  # the third result dies unwritten: it runs again
    ("after_commit", "after_commit=kill@2"),  # a committed batch is never run again
])
async def test_failpoint_kills_the_worker(tmp_path: Path, postgres_url: str, point: str,
                                          spec: str) -> None:
    async with FaultRun(tmp_path, postgres_url, name=f"failpoint {point}") as run:
        s1 = run.scheduler("s1")
        w1 = run.worker("w1", "default:4", failpoints=spec)
        w2 = run.worker("w2", "default:4")
        await run.start(s1, w1, w2)
        t0 = next_second(after=2)
        jobs = await run.create(ticks(run, t0))
        run.expect(jobs, t0, t0 + timedelta(seconds=WINDOW))
        await w1.wait_for(rf"failpoint {point} hit \d+: killing process", within=WINDOW + 10)
        await run.settle(run.all_settled, within=40)
        assert await asyncio.gather(run.stop_cleanly(s1), run.stop_cleanly(w2)) == [0, 0]
        report = await run.check()
    assert [f.kind for f in run.faults] == [f"failpoint {point}"]
    if point == "after_execute":
        assert report.explained, "the job whose result died with w1 ran again, as attempt 2"


async def test_sigterm_with_jobs_running_loses_nothing_and_charges_nothing(
    tmp_path: Path, postgres_url: str,
) -> None:
    async with FaultRun(tmp_path, postgres_url, name="SIGTERM with jobs running") as run:
        s1 = run.scheduler("s1")
        w1 = run.worker("w1", "default:4,long:4", TICKWORK_SHUTDOWN_GRACE_SECONDS="0.5")
        w2 = run.worker("w2", "default:4")
        await run.start(s1, w1, w2)
        t0 = next_second(after=2)
        long_docs = [run.doc(f"long-{i}", {"at": rfc3339(t0 + timedelta(seconds=1))}, sleep=4,
                             queue="long", timeout_seconds=10) for i in range(3)]
        jobs = await run.create(ticks(run, t0) + long_docs)
        run.expect(jobs, t0, t0 + timedelta(seconds=WINDOW))

        def long_running() -> bool:
            rows = ledger.read(run.ledger)
            return sum(r.job.startswith("long-") and r.outcome is None for r in rows) == 3

        await run.settle(long_running, within=15, what="the long jobs running on w1")
        await run.pause(run.rng.uniform(0, 1.5))
        assert await run.sigterm(w1) == 0
        assert any("released 3 unfinished attempts without charging them" in line
                   for line in w1.lines), w1.tail()
        w3 = run.worker("w3", "long:4")
        await run.start(w3)
        await run.settle(run.all_settled, within=30)
        assert await asyncio.gather(*(run.stop_cleanly(p) for p in (s1, w2, w3))) == [0, 0, 0]
        report = await run.check()
    runs = [e for e in run.executions() if e.occurrence.startswith("long-")]
    assert sorted((e.occurrence, e.attempt, e.worker) for e in runs) == sorted(
        [(e.occurrence, 1, "w1") for e in runs if e.worker == "w1"]
        + [(e.occurrence, 1, "w3") for e in runs if e.worker == "w1"]), "rerun uncharged"
    assert len(report.explained) == 3


async def test_poison_job_ends_crashed_after_max_attempts(tmp_path: Path,
                                                          postgres_url: str) -> None:
    attempts = 3 if full() else 2
    async with FaultRun(tmp_path, postgres_url, name="poison job") as run:
        s1, w2 = run.scheduler("s1"), run.worker("w2", "default:4")
        await run.start(s1, w2, run.worker("pw-1", "poison:1"))
        t0 = next_second(after=2)
        poison = run.doc("poison", {"at": rfc3339(t0 + timedelta(seconds=1))}, kill_worker=True,
                         queue="poison", timeout_seconds=1,
                         retry={"max_attempts": attempts, "backoff_base_seconds": 0.1})
        jobs = await run.create([*ticks(run, t0, window=WINDOW + 6 * attempts), poison])
        run.expect(jobs, t0, t0 + timedelta(seconds=WINDOW + 6 * attempts))

        async def supervise() -> None:  # what systemd or Kubernetes would do: restart it
            for n in range(2, attempts + 2):
                await run.procs[-1].wait_exit(within=60)
                await run.start(run.worker(f"pw-{n}", "poison:1"))

        supervisor = asyncio.create_task(supervise())

        async def poison_settled() -> bool:
            return (await run.final_states()).get(f"poison@{rfc3339(t0 + timedelta(seconds=1))}"
                                                  ) == "crashed" and run.all_done_but(1)

        await run.settle(poison_settled, within=20 + 8 * attempts, what="the poison job to end")
        supervisor.cancel()
        await asyncio.gather(supervisor, return_exceptions=True)
        assert await asyncio.gather(run.stop_cleanly(s1), run.stop_cleanly(w2)) == [0, 0]
        report = await run.check()
    rows = [e for e in run.executions() if e.occurrence.startswith("poison@")]
    assert [e.attempt for e in sorted(rows, key=lambda e: e.started)] == list(
        range(1, attempts + 1)), "the attempt counter is durable: max_attempts bounds the loop"
    assert report.accounted == {"crashed": [rows[0].occurrence]}
    assert len([f for f in run.faults if f.kind == "died"]) == attempts


@pytest.mark.skipif(not FAKETIME_LIB.exists() and os.environ.get("CI") != "true",
                    reason=f"libfaketime is not installed ({FAKETIME_LIB}); apt-get install -y "
                    "faketime (.ci/run does; under CI=true its absence fails the test)")
async def test_a_worker_clock_30s_fast_never_starts_a_job_early(tmp_path: Path,
                                                                postgres_url: str) -> None:
    async with FaultRun(tmp_path, postgres_url, name="worker clock +30s") as run:
        s1, w1 = run.scheduler("s1"), run.worker("w1", "default:8", faketime="+30s")
        await run.start(s1, w1)
        t0 = next_second(after=2)
        once = [run.doc(f"once-{i}", {"at": rfc3339(t0 + timedelta(seconds=i % 4 + 1))})
                for i in range(8)]
        jobs = await run.create(ticks(run, t0, sleep=0.1) + once)
        run.expect(jobs, t0, t0 + timedelta(seconds=WINDOW))
        await run.settle(run.all_done, within=WINDOW + 20)
        assert await asyncio.gather(run.stop_cleanly(s1), run.stop_cleanly(w1)) == [0, 0]
        await run.check()
    skew = [r.started - (r.started_mono + run.mono_offset) for r in ledger.read(run.ledger)]
    assert all(29 < s < 31 for s in skew), "the worker's wall clock really was 30 s fast"
