"""The postgres deployment as real processes: ``tickwork scheduler`` and ``tickwork worker``,
several of each on one database, with kill -9 of a scheduler and of a worker mid-job.

What ran is judged from a ledger the executed jobs write themselves (tickwork.testing.ledger),
never from the store's tables.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.models import rfc3339
from tickwork.testing import ledger
from tickwork.testing.faults import procs
from tickwork.testing.processes import cli, cli_json, env_for

pytestmark = pytest.mark.slow


class Proc(procs.Proc):
    """A tickwork process (the fault harness's), named after its command and id."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        super().__init__(" ".join(args[:3]), env, *args)

    async def wait_for(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        return await super().wait_for(pattern, timeout)

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)

    async def terminate(self, timeout: float = 30.0) -> int:
        self.signal(signal.SIGTERM, group=False)
        return await self.wait_exit(timeout)


def next_second(after: float) -> datetime:
    now = datetime.now(UTC) + timedelta(seconds=after)
    return now.replace(microsecond=0) + timedelta(seconds=1)


def record_doc(name: str, path: Path, schedule: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "kind": "python",
            "payload": {"callable": "tickwork.testing.ledger:record",
                        "kwargs": {"path": str(path)}}, **extra}


def written(path: Path) -> list[dict[str, Any]]:
    """The ledger's complete lines (a job may be writing the next one right now)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line]


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def create(env: dict[str, str], docs: list[dict[str, Any]]) -> None:
    code, _, err = await cli(env, "jobs", "create", "--json", "-", "--quiet",
                             stdin=json.dumps(docs))
    assert code == 0, err


async def until(condition: Any, timeout: float, what: Any) -> None:
    """Bounded polling, for conditions only files show (the ledger jobs write)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what() if callable(what) else what}"
        await asyncio.sleep(0.25)


async def start_all(procs: list[Proc]) -> list[Proc]:
    return list(await asyncio.gather(*(p.start() for p in procs)))


TICKS = 15  # seconds of ticks of the recurring jobs beside the burst


async def test_three_schedulers_three_workers_run_everything_exactly_once(
    tmp_path: Path, postgres_url: str,
) -> None:
    env = env_for(tmp_path, TICKWORK_DATABASE_URL=postgres_url)
    path = tmp_path / "ledger.jsonl"
    procs = [Proc(env, "scheduler", "--scheduler-id", f"s{i}") for i in range(3)]
    procs += [Proc(env, "worker", "--worker-id", f"w{i}") for i in range(3)]
    try:
        await start_all(procs)
        t0 = next_second(after=6)
        cron = {"cron": "* * * * * *", "start_at": rfc3339(t0),
                "end_at": rfc3339(t0 + timedelta(seconds=TICKS - 0.5))}
        await create(env, [record_doc(f"once-{i:04d}", path, {"at": rfc3339(t0)})
                           for i in range(5000)]
                     # allow_all: this test asks for delivery; a tick queued behind the burst
                     # would otherwise rightly be skipped by the default overlap policy
                     + [record_doc(f"tick-{i:03d}", path, cron, overlap="allow_all")
                        for i in range(100)])
        expected = 5000 + 100 * TICKS

        def all_in() -> bool:
            return len({r["key"] for r in written(path)}) >= expected

        def progress() -> str:
            rows = written(path)
            ended = max((r["ended"] for r in rows), default=0) - t0.timestamp()
            logs = "\n".join(line for p in procs for line in p.lines[-8:])
            return (f"{expected} executions: {len({r['key'] for r in rows})} in the ledger, "
                    f"the last ended at t0 + {ended:.1f}s; logs:\n{logs}")

        await until(all_in, timeout=70, what=progress)
        codes = await asyncio.gather(*(p.terminate() for p in procs))
        assert codes == [0] * 6
    finally:
        for p in procs:
            await p.close()

    lines = ledger.read(path)
    counts = Counter(r["key"] for r in lines)
    assert len(counts) == expected
    assert [k for k, n in counts.items() if n > 1] == [], "an occurrence ran twice"
    assert {r["attempt"] for r in lines} == {1}
    early = [r for r in lines if r["started"] < parse(r["scheduled_at"]).timestamp()]
    assert early == [], "an occurrence started before its time"
    ticks: dict[str, list[datetime]] = {}
    for r in lines:
        if r["job"].startswith("tick-"):
            ticks.setdefault(r["job"], []).append(parse(r["scheduled_at"]))
    assert len(ticks) == 100
    want = [t0 + timedelta(seconds=s) for s in range(TICKS)]
    assert all(sorted(times) == want for times in ticks.values())
    assert len({r["pid"] for r in lines}) == 3, "every worker took a share"


async def test_kill_9_of_a_scheduler_and_of_a_worker_mid_job_loses_nothing(
    tmp_path: Path, postgres_url: str,
) -> None:
    # Short leases, shard leases too: s1's shards move to s2 before the beats s1 planned
    # ahead (the 5 s horizon) run out, so no beat comes late and none is skipped as overdue
    # behind a later one. Failover with the default shard lease is the fault suite's
    # (tests/faults/test_faults_schedulers.py).
    env = env_for(tmp_path, TICKWORK_DATABASE_URL=postgres_url, TICKWORK_LEASE_SECONDS="2",
                  TICKWORK_SHARD_LEASE_SECONDS="2", TICKWORK_HEARTBEAT_SECONDS="0.5",
                  TICKWORK_RESCUE_INTERVAL_SECONDS="0.5")
    path = tmp_path / "ledger.jsonl"
    started_path = tmp_path / "started.txt"
    s1, s2 = Proc(env, "scheduler", "--scheduler-id", "s1"), Proc(env, "scheduler")
    doomed = Proc(env, "worker", "--queues", "slow:1", "--worker-id", "doomed")
    steady = Proc(env, "worker", "--queues", "default:4", "--worker-id", "steady")
    heir = Proc(env, "worker", "--queues", "slow:1", "--worker-id", "heir")
    procs = [s1, s2, doomed, steady, heir]
    try:
        await start_all([s1, s2, doomed, steady])
        t0 = next_second(after=3)
        beats = {"cron": "* * * * * *", "start_at": rfc3339(t0),
                 "end_at": rfc3339(t0 + timedelta(seconds=15.5))}
        await create(env, [
            record_doc("beat", path, beats),
            {"name": "slow", "schedule": {"at": rfc3339(t0)}, "kind": "python",
             "queue": "slow", "timeout_seconds": 4,
             "payload": {"callable": "tickwork.testing.postgres:started_then_record",
                         "kwargs": {"path": str(path), "started_path": str(started_path),
                                    "sleep": 3}}},
        ])
        await until(started_path.exists, timeout=20, what="the slow job to start")
        doomed.kill9()  # mid-job: its attempt 1 never finishes
        await steady.wait_for(r"beat @ \S+ attempt 1: succeeded")
        await steady.wait_for(r"beat @ \S+ attempt 1: succeeded")
        s1.kill9()  # its shards go to s2 once their leases expire
        await heir.start()
        await heir.wait_for(r"slow @ \S+ attempt 2: succeeded", timeout=30)

        def beats_done() -> bool:
            return len({r["key"] for r in written(path) if r["job"] == "beat"}) >= 16

        def beats_seen() -> str:
            got = sorted({r["scheduled_at"] for r in written(path) if r["job"] == "beat"})
            logs = "\n".join(line for p in procs for line in p.lines[-6:])
            return f"16 beats; {len(got)} ran: {got}; logs:\n{logs}"

        await until(beats_done, timeout=30, what=beats_seen)
        assert await asyncio.gather(*(p.terminate() for p in (s2, steady, heir))) == [0] * 3
    finally:
        for p in procs:
            await p.close()

    lines = ledger.read(path)
    beat_lines = [r for r in lines if r["job"] == "beat"]
    assert sorted(parse(r["scheduled_at"]) for r in beat_lines) == [
        t0 + timedelta(seconds=s) for s in range(16)], "every beat ran exactly once"
    assert all(r["started"] >= parse(r["scheduled_at"]).timestamp() for r in lines)
    [slow] = [r for r in lines if r["job"] == "slow"]
    starts = [line.split() for line in started_path.read_text().splitlines()]
    assert [(key, attempt) for key, attempt, *_ in starts] == [
        (slow["key"], "1"), (slow["key"], "2")], "same key, next attempt"
    assert slow["attempt"] == 2
    [run] = await cli_json(env, "runs", "list", "--job", "slow")
    assert (run["state"], run["attempt"], run["idempotency_key"]) == (
        "succeeded", 2, slow["key"])
    detail = await cli_json(env, "runs", "show", "slow", run["scheduled_at"])
    assert [(a["outcome"], a["worker"]) for a in detail["attempts"]] == [
        ("crashed", "doomed"), ("succeeded", "heir")]
