"""Global limits as real processes: one scheduler and three workers on one PostgreSQL
database, a queue limited to 5 running at once and 50 starts a second (burst 10), and a burst
of jobs all due at one instant.

Judged from the ledger the executed jobs write themselves (tickwork.testing.ledger): never more
than 5 executions overlap, never more than rate + burst starts in any one-second window, and
every job ran exactly once. 300 jobs by default; FULL=1 runs the full 2,000.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from pathlib import Path

import pytest
from test_postgres_processes import Proc, create, next_second, record_doc, start_all, until, written

from tickwork.models import rfc3339
from tickwork.testing.processes import cli, cli_json, env_for

pytestmark = pytest.mark.slow

JOBS = 2000 if os.environ.get("FULL") else 300
MAX_RUNNING, RATE, BURST = 5, 50, 10
# A start is logged by the job itself, a moment after its claim spent the token: starts may
# bunch by that dispatch delay, so a window may hold the tokens of this much more time.
DISPATCH_SLACK_SECONDS = 0.1


def most_at_once(rows: list[dict[str, float]]) -> int:
    events = sorted([(r["started"], 1) for r in rows] + [(r["ended"], -1) for r in rows])
    level = peak = 0
    for _, step in events:  # an end sorts before a start at the same instant
        level += step
        peak = max(peak, level)
    return peak


def most_starts_in_a_second(rows: list[dict[str, float]]) -> int:
    starts = sorted(r["started"] for r in rows)
    peak, first = 0, 0
    for last, at in enumerate(starts):
        while at - starts[first] >= 1.0:
            first += 1
        peak = max(peak, last - first + 1)
    return peak


async def test_three_workers_never_exceed_a_queue_limit(tmp_path: Path,
                                                       postgres_url: str) -> None:
    env = env_for(tmp_path, TICKWORK_DATABASE_URL=postgres_url)
    path = tmp_path / "ledger.jsonl"
    code, _, err = await cli(env, "migrate")
    assert code == 0, err
    code, _, err = await cli(env, "queues", "set", "limited", "--max-running", str(MAX_RUNNING),
                             "--rate", f"{RATE}/s", "--burst", str(BURST))
    assert code == 0, err
    procs = [Proc(env, "scheduler", "--scheduler-id", "s0")]
    procs += [Proc(env, "worker", "--worker-id", f"w{i}", "--queues", "limited:16")
              for i in range(3)]
    try:
        await start_all(procs)
        t0 = next_second(after=4)
        docs = [record_doc(f"call-{i:04d}", path, {"at": rfc3339(t0)}, queue="limited")
                for i in range(JOBS)]
        for doc in docs:  # each takes a little while, so that runs overlap
            doc["payload"]["kwargs"]["sleep"] = 0.05
        await create(env, docs)

        def all_in() -> bool:
            return len(written(path)) >= JOBS

        await until(all_in, timeout=30 + JOBS / RATE * 2,
                    what=lambda: f"{len(written(path))} of {JOBS} executions")
        codes = await asyncio.gather(*(p.terminate() for p in procs))
        assert codes == [0] * len(procs)
    finally:
        for p in procs:
            await p.close()
    rows = written(path)
    runs = Counter(r["key"] for r in rows)
    assert len(runs) == JOBS  # nothing lost
    assert set(runs.values()) == {1}  # nothing twice
    assert {r["attempt"] for r in rows} == {1}  # waiting charged no attempt
    overlap, per_second = most_at_once(rows), most_starts_in_a_second(rows)
    assert overlap <= MAX_RUNNING, f"{overlap} ran at once"
    assert per_second <= RATE + BURST + RATE * DISPATCH_SLACK_SECONDS, (
        f"{per_second} started within one second")
    assert overlap == MAX_RUNNING  # the limit, not something else, set the pace
    assert len({r["pid"] for r in rows}) > 1  # the limit held across workers, not in one


async def test_a_killed_workers_slots_come_back_when_its_leases_expire(
        tmp_path: Path, postgres_url: str) -> None:
    """max_running counts unexpired leases: after kill -9 of a worker holding both slots of a
    queue, nothing of the queue starts until its leases expire, and then it does."""
    env = env_for(tmp_path, TICKWORK_DATABASE_URL=postgres_url, TICKWORK_LEASE_SECONDS="2",
                  TICKWORK_HEARTBEAT_SECONDS="1")
    path = tmp_path / "ledger.jsonl"
    assert (await cli(env, "migrate"))[0] == 0
    assert (await cli(env, "queues", "set", "guarded", "--max-running", "2"))[0] == 0
    scheduler = Proc(env, "scheduler", "--scheduler-id", "s0")
    doomed = Proc(env, "worker", "--worker-id", "w0", "--queues", "guarded:4")
    heir = Proc(env, "worker", "--worker-id", "w1", "--queues", "guarded:4")
    try:
        await start_all([scheduler, doomed])
        at = rfc3339(next_second(after=1))
        holds = [record_doc(f"hold-{i}", path, {"at": at}, queue="guarded",
                            timeout_seconds=4, retry={"max_attempts": 1}) for i in range(2)]
        for doc in holds:  # far longer than the test waits: they hold their slots
            doc["payload"]["kwargs"]["sleep"] = 60
        await create(env, holds)

        async def running() -> int:
            return len(await cli_json(env, "runs", "list", "--state", "running"))

        deadline = asyncio.get_running_loop().time() + 30
        while await running() < 2:
            assert asyncio.get_running_loop().time() < deadline, "the holds never ran"
            await asyncio.sleep(0.25)
        doomed.kill9()
        killed = time.time()
        await create(env, [record_doc(f"after-{i}", path, {"at": rfc3339(next_second(0))},
                                      queue="guarded") for i in range(2)])
        await heir.start()
        await until(lambda: len(written(path)) >= 2, timeout=45,
                    what=lambda: f"{len(written(path))} of 2 runs after the kill")
        codes = await asyncio.gather(scheduler.terminate(), heir.terminate())
        assert codes == [0, 0]
    finally:
        for p in (scheduler, doomed, heir):
            await p.close()
    after = written(path)
    assert sorted(r["job"] for r in after) == ["after-0", "after-1"]
    # The dead worker's leases (the 4 s timeout plus a 5 s margin) held both slots a while.
    assert min(r["started"] for r in after) >= killed + 3
