"""``tickwork run`` as a real process: kill -9 and restart, SIGTERM with jobs running.

What ran is judged from a ledger the executed jobs write themselves, and from the run history
the CLI prints, never from the store's tables directly.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tickwork.models import rfc3339
from tickwork.testing import ledger
from tickwork.testing.processes import Service, cli, cli_json, env_for

pytestmark = pytest.mark.slow


def next_second(after: float = 2.0) -> datetime:
    now = datetime.now(UTC) + timedelta(seconds=after)
    return now.replace(microsecond=0) + timedelta(seconds=1)


def ledger_doc(name: str, path: Path, schedule: dict[str, Any], sleep: float = 0,
               hang_attempts: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "kind": "python",
            "payload": {"callable": "tickwork.testing.ledger:record",
                        "kwargs": {"path": str(path), "sleep": sleep,
                                   "hang_attempts": hang_attempts}}, **extra}


def parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def create(env: dict[str, str], docs: list[dict[str, Any]]) -> None:
    code, _, err = await cli(env, "jobs", "create", "--json", "-", stdin=json.dumps(docs))
    assert code == 0, err


async def running(env: dict[str, str], name: str, at: datetime) -> None:
    """Until the run of ``name`` at ``at`` is running (the store says so: the CLI asks it)."""
    for _ in range(120):
        run = await cli_json(env, "runs", "show", name, rfc3339(at))
        if run["state"] == "running":
            return
        await asyncio.sleep(0.25)  # another process's state: no event to wait on
    raise AssertionError(f"{name} @ {rfc3339(at)} never started")


async def test_kill_9_and_restart_lose_nothing_that_was_due(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    path = tmp_path / "ledger.jsonl"
    t0 = next_second()
    every_second = {"cron": "* * * * * *", "start_at": rfc3339(t0)}
    await create(env, [
        # attempt 1 is mid-run when the service dies, however slow the machine
        ledger_doc("slow", path, {"at": rfc3339(t0)}, sleep=1, hang_attempts=1),
        # allow_all: catching up, the overdue runs start together instead of being skipped
        ledger_doc("late", path, every_second, overlap="allow_all"),
        ledger_doc("strict", path, every_second, catchup_window_seconds=2, overlap="allow_all"),
    ])
    first = await Service(env, "--worker-id", "first").start()
    try:
        await first.wait_for(r"strict @ \S+ attempt 1: succeeded")
        await first.wait_for(r"strict @ \S+ attempt 1: succeeded")
        await running(env, "slow", t0)
        first.kill9()
        killed_at = datetime.now(UTC)
        await asyncio.sleep(5)  # the outage itself
    finally:
        await first.close()

    second = await Service(env, "--worker-id", "second").start()
    try:
        await second.wait_for(r"slow @ \S+ attempt 2: succeeded")
        for _ in range(3):  # caught up: strict runs on time again
            await second.wait_for(r"strict @ \S+ attempt 1: succeeded")
        second.terminate()
        assert await second.exit_code() == 0
    finally:
        await second.close()

    runs = await cli_json(env, "runs", "list", "--limit", "1000", "--oldest-first")
    by_job: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_job.setdefault(run["job_name"], []).append(run)

    # The job that was running when the service died ran again, same key, next attempt.
    [slow] = by_job["slow"]
    assert (slow["state"], slow["attempt"]) == ("succeeded", 2)
    detail = await cli_json(env, "runs", "show", "slow", slow["scheduled_at"])
    assert [a["outcome"] for a in detail["attempts"]] == ["crashed", "succeeded"]
    slow_lines = [r for r in ledger.read(path) if r["job"] == "slow"]
    assert [r["attempt"] for r in slow_lines] == [2]
    assert slow_lines[0]["key"] == slow["idempotency_key"]

    # A wide catch-up window: every second ran, those of the outage late.
    late = [r for r in by_job["late"] if r["state"] != "scheduled"]
    assert {r["state"] for r in late} == {"succeeded"}
    late_times = [parse(r["scheduled_at"]) for r in late]
    assert late_times == [t0 + timedelta(seconds=i) for i in range(len(late_times))]
    assert late_times[-1] > killed_at + timedelta(seconds=5)

    # A 2 s window: each second of the outage either ran late or is marked missed, once.
    strict = [r for r in by_job["strict"] if r["state"] != "scheduled"]
    strict_times = [parse(r["scheduled_at"]) for r in strict]
    assert strict_times == [t0 + timedelta(seconds=i) for i in range(len(strict_times))]
    assert {r["state"] for r in strict} == {"succeeded", "missed"}
    missed = [parse(r["scheduled_at"]) for r in strict if r["state"] == "missed"]
    assert all(killed_at - timedelta(seconds=1) <= t <= killed_at + timedelta(seconds=6)
               for t in missed)

    # The ledger: nothing ran before its time; a key ran twice only if it was in flight at the
    # kill (G4): the same key with the next attempt number, at most one per running slot.
    lines = ledger.read(path)
    assert all(r["started"] >= parse(r["scheduled_at"]).timestamp() for r in lines)
    attempts: dict[str, list[int]] = {}
    for r in lines:
        attempts.setdefault(r["key"], []).append(r["attempt"])
    repeated = {k: a for k, a in attempts.items() if len(a) > 1}
    assert all(a == list(range(a[0], a[0] + len(a))) for a in repeated.values()), repeated
    assert len(repeated) <= 3, repeated  # three jobs, so at most three attempts were running
    final = {r["idempotency_key"]: r for r in runs}
    assert all(final[k]["attempt"] == a[-1] for k, a in repeated.items())
    succeeded = {r["idempotency_key"] for r in runs if r["state"] == "succeeded"}
    assert succeeded == set(attempts)


async def test_sigterm_lets_running_jobs_finish(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    path = tmp_path / "ledger.jsonl"
    t0 = next_second()
    await create(env, [
        ledger_doc("long", path, {"at": rfc3339(t0)}, sleep=2),
        ledger_doc("beat", path, {"cron": "* * * * * *", "start_at": rfc3339(t0)}),
    ])
    service = await Service(env).start()
    try:
        await service.wait_for(r"beat @ \S+ attempt 1: succeeded")
        await service.wait_for(r"beat @ \S+ attempt 1: succeeded")  # long is mid-run now
        service.terminate()
        await service.wait_for(r"waiting up to 30s for 1 running attempts")
        await service.wait_for(r"long @ \S+ attempt 1: succeeded")
        assert await service.exit_code() == 0
    finally:
        await service.close()
    [long_run] = await cli_json(env, "runs", "list", "--job", "long")
    assert (long_run["state"], long_run["attempt"]) == ("succeeded", 1)
    assert [r["attempt"] for r in ledger.read(path) if r["job"] == "long"] == [1]


async def test_sigterm_past_the_grace_period_releases_without_charging(tmp_path: Path) -> None:
    env = env_for(tmp_path, TICKWORK_SHUTDOWN_GRACE_SECONDS="0.5")
    path = tmp_path / "ledger.jsonl"
    t0 = next_second()
    await create(env, [
        ledger_doc("too-long", path, {"at": rfc3339(t0)}, sleep=3),
        ledger_doc("beat", path, {"cron": "* * * * * *", "start_at": rfc3339(t0)}),
    ])
    service = await Service(env).start()
    try:
        await service.wait_for(r"beat @ \S+ attempt 1: succeeded")
        await service.wait_for(r"beat @ \S+ attempt 1: succeeded")
        service.terminate()
        await service.wait_for(r"released 1 unfinished attempts without charging them")
        assert await service.exit_code() == 0
    finally:
        await service.close()
    [run] = await cli_json(env, "runs", "list", "--job", "too-long")
    assert (run["state"], run["attempt"]) == ("scheduled", 0)
    detail = await cli_json(env, "runs", "show", "too-long", run["scheduled_at"])
    assert detail["attempts"] == []

    again = await Service(env).start()
    try:
        await again.wait_for(r"too-long @ \S+ attempt 1: succeeded")
        again.terminate()
        assert await again.exit_code() == 0
    finally:
        await again.close()
    assert [r["attempt"] for r in ledger.read(path) if r["job"] == "too-long"] == [1]
