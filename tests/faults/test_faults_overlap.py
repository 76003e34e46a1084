"""Fault suite, overlap: ``kill -9`` while a slow run of an ``overlap: skip`` job is in flight,
then a restart once the store has taken the run back (at once on SQLite; after its lease, by
the scheduler's rescuer, on PostgreSQL), with ticks due in between. The interrupted run is the
earlier one: it runs again as attempt 2 with the same idempotency key and is never recorded
``skipped_overlap``; the ticks that came due meanwhile are the ones skipped (G4, G5, G8). On
every deployment: embedded (``tickwork run --no-api`` on SQLite), PostgreSQL (scheduler +
worker, the worker killed and a new one started) and PostgreSQL with Redis dispatch. Judged
from the ledger the job writes, and the store's final states.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta
from pathlib import Path

import pytest

from tickwork.models import rfc3339
from tickwork.testing.faults import ledger, redisserver
from tickwork.testing.faults.classify import in_flight
from tickwork.testing.faults.procs import Proc
from tickwork.testing.faults.run import FINAL_STATES, FaultRun, next_second

pytestmark = [pytest.mark.faults, pytest.mark.timeout(90)]
redis = redisserver.private_redis

SLOW = 3.0  # seconds each run of the job takes
# Seconds of one-second ticks: past the restart on PostgreSQL, which waits for the rescue of the
# dead worker's run after its lease (the job's timeout + 5 s), so ticks are due around it.
WINDOW = 18
OUTAGE = 2.0  # seconds from the rescue (SQLite: the kill) to the restart


class Deployment:
    """The processes of one deployment: ``first`` runs the job and is killed; ``restart``
    brings up its replacement; ``others`` keep running throughout."""

    def __init__(self, run: FaultRun, kind: str) -> None:
        self.run = run
        self.kind = kind
        self.others: list[Proc] = []
        self.first = self._runner("1")

    def _runner(self, n: str) -> Proc:
        if self.kind == "embedded":
            return self.run.service(f"svc-{n}", "default:4")
        return self.run.worker(f"w{n}", "default:4")

    async def start(self) -> None:
        if self.kind != "embedded":
            self.others.append(self.run.scheduler("s1"))
        await self.run.start(*self.others, self.first)

    async def until_rescued(self, occurrence: str) -> None:
        """Until the store takes the killed run back (its lease expired: ``retrying``, due
        now). A scheduler's rescuer does it on PostgreSQL; the embedded service does it as it
        starts again, holding the database's lock file."""
        if self.kind == "embedded":
            return

        async def retrying() -> bool:
            return (await self.run.final_states()).get(occurrence) == "retrying"

        await self.run.settle(retrying, within=20, what=f"{occurrence} rescued")

    async def restart(self) -> Proc:
        second = self._runner("2")
        await self.run.start(second)
        return second


async def test_kill_9_mid_run_embedded(tmp_path: Path) -> None:
    await kill_9_mid_run_of_a_skip_job(tmp_path, "embedded", f"sqlite:///{tmp_path}/tickwork.db")


async def test_kill_9_mid_run_postgres(tmp_path: Path, postgres_url: str) -> None:
    await kill_9_mid_run_of_a_skip_job(tmp_path, "postgres", postgres_url)


async def test_kill_9_mid_run_postgres_redis(tmp_path: Path, postgres_url: str,
                                            redis: redisserver.PrivateRedis) -> None:
    await kill_9_mid_run_of_a_skip_job(tmp_path, "postgres+redis", postgres_url, redis.url)


async def kill_9_mid_run_of_a_skip_job(tmp_path: Path, kind: str, database: str,
                                       redis_url: str | None = None) -> None:
    """The run in flight at the kill reruns as attempt 2 and ends succeeded."""
    async with FaultRun(tmp_path, database, name=f"kill -9 mid-run of a skip job ({kind})",
                        redis=redis_url) as run:
        deployment = Deployment(run, kind)
        await deployment.start()
        t0 = next_second(after=1)
        tick = {"cron": "* * * * * *", "start_at": rfc3339(t0),
                "end_at": rfc3339(t0 + timedelta(seconds=WINDOW - 0.5))}
        jobs = await run.create([run.doc("slow", tick, sleep=SLOW, overlap="skip",
                                         timeout_seconds=SLOW + 1)])
        run.expect(jobs, t0, t0 + timedelta(seconds=WINDOW))
        await run.settle(lambda: any(r.outcome is None for r in ledger.read(run.ledger)),
                         within=10, what="a run of the slow job in flight")
        await run.pause(run.rng.uniform(0.2, SLOW - 1))  # the seeded moment, mid-request
        fault = run.kill9(deployment.first)
        (cut,) = in_flight(run.executions(), fault)
        await deployment.until_rescued(cut.occurrence)
        await run.pause(OUTAGE)  # newer ticks come due, none is claimed
        second = await deployment.restart()

        async def every_occurrence_settled() -> bool:
            states = await run.final_states()
            return all(states.get(o) in FINAL_STATES for o in run.expected)

        await run.settle(every_occurrence_settled, within=WINDOW + 30,
                         what="every occurrence to end")
        states = await run.final_states()
        codes = await asyncio.gather(*(run.stop_cleanly(p) for p in [*deployment.others,
                                                                     second]))
        assert codes == [0] * len(codes), "every process stops cleanly"
        report = await run.check()

    executions = sorted(run.executions(), key=lambda e: e.started)
    assert in_flight(executions, fault) == [cut]
    runs = [e for e in executions if e.occurrence == cut.occurrence]
    assert [(e.attempt, e.outcome) for e in runs] == [(1, None), (2, "ok")], runs
    assert runs[1].key == cut.key, "the rerun has the interrupted run's idempotency key"
    assert states[cut.occurrence] == "succeeded"
    assert report.explained == [cut.occurrence]
    started = {e.occurrence for e in executions}
    assert [o for o in started if states[o] != "succeeded"] == [], \
        "an occurrence that started ends succeeded, never skipped_overlap"
    assert "skipped_overlap" in states.values(), "ticks due while it ran were skipped"
    finished = [e for e in executions if e.ended is not None]
    for earlier, later in itertools.pairwise(finished):
        assert earlier.ended is not None
        assert later.started >= earlier.ended, f"{later.occurrence} overlapped {earlier}"
    rerun_after = runs[1].started - fault.at
    print(f"  {cut.occurrence} cut short at attempt 1, ran again as attempt 2 "
          f"{rerun_after:.2f}s after the kill")
