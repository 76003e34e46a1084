"""The planner and worker pool end to end in one process, with time on a FakeClock."""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tickwork.clock import SystemClock
from tickwork.models import AttemptOutcome, OccurrenceState, rfc3339
from tickwork.testing import ledger
from tickwork.testing.harness import START, Harness, make_harness
from tickwork.testing.jobs import EVENTS


def ledger_job(name: str, path: Path, schedule: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "kind": "python",
            "payload": {"callable": "tickwork.testing.ledger:record",
                        "kwargs": {"path": str(path), **extra.pop("kwargs", {})}},
            **extra}


async def test_one_off_job_runs_once_at_its_time_not_before(harness: Harness) -> None:
    path = harness.tmp / "ledger.jsonl"
    at = START + timedelta(seconds=3)
    job = await harness.client.create_job(ledger_job("once", path, {"at": rfc3339(at)}))

    await harness.tick()
    await harness.tick(2)  # planned now (within the horizon) but not yet due
    assert harness.written.empty()
    await harness.tick(1)
    done = await harness.completed()

    assert (done.job_id, done.scheduled_at, done.state) == (job.id, at, OccurrenceState.SUCCEEDED)
    assert done.started_at >= at
    runs = ledger.read(path)
    assert [(r["key"], r["attempt"]) for r in runs] == [(f"{job.id}:{rfc3339(at)}", 1)]
    assert (await harness.client.get_job(job.id)).next_run_at is None


async def test_cron_with_seconds_runs_every_second_for_a_minute(harness: Harness) -> None:
    path = harness.tmp / "ledger.jsonl"
    job = await harness.client.create_job(
        ledger_job("per-second", path, {"cron": "* * * * * *"}))

    for second in range(60):
        await harness.tick(1 if second else 0)
        done = await harness.completed()
        assert done.scheduled_at == START + timedelta(seconds=second)

    history = await harness.client.list_runs(job=job.id, limit=1000, newest_first=False)
    finished = [o for o in history if o.state is OccurrenceState.SUCCEEDED]
    times = [o.scheduled_at for o in finished]
    assert times == [START + timedelta(seconds=s) for s in range(60)]  # no gap, no duplicate
    assert all(o.attempt == 1 for o in finished)
    keys = [r["key"] for r in ledger.read(path)]
    assert len(keys) == 60
    assert len(set(keys)) == 60


@pytest.fixture
async def http_target() -> Any:
    """A real local HTTP server: /fail answers 500, /ok answers 200; it records every request."""
    seen: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append({"path": request.path, "key": request.headers.get("Idempotency-Key"),
                     "attempt": request.headers.get("Tickwork-Attempt")})
        return web.Response(status=500 if request.path == "/fail" else 200, text="hi")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", seen
    await runner.cleanup()


async def test_http_500_ends_dead_after_three_attempts_with_growing_gaps(
    harness: Harness, http_target: Any
) -> None:
    base, seen = http_target
    job = await harness.client.create_job({
        "name": "failing-hook", "schedule": {"at": rfc3339(START)}, "kind": "http",
        "payload": {"url": f"{base}/fail"},
        "retry": {"max_attempts": 3, "backoff_base_seconds": 1, "backoff_max_seconds": 60,
                  "jitter": "none"},
    })
    await harness.tick()
    first = await harness.completed()
    assert first.state is OccurrenceState.RETRYING
    assert first.due_at == first.finished_at + timedelta(seconds=1)

    await harness.tick(1)
    second = await harness.completed()
    assert second.state is OccurrenceState.RETRYING
    assert second.due_at == second.finished_at + timedelta(seconds=2)

    await harness.tick(2)
    third = await harness.completed()
    assert third.state is OccurrenceState.DEAD

    harness.clock.advance(600)
    await harness.tick()
    attempts = await harness.store.attempt_list(job.id, START)
    assert [a.number for a in attempts] == [1, 2, 3]
    assert all(a.outcome is AttemptOutcome.FAILED for a in attempts)
    assert all(a.output and a.output.startswith("HTTP 500") for a in attempts)
    gaps = [(later.started_at - earlier.finished_at).total_seconds()  # type: ignore[operator]
            for earlier, later in itertools.pairwise(attempts)]
    assert gaps == [1.0, 2.0]
    assert [s["attempt"] for s in seen] == ["1", "2", "3"]
    assert {s["key"] for s in seen} == {f"{job.id}:{rfc3339(START)}"}
    run = await harness.store.occurrence_get(job.id, START)
    assert (run.state, run.attempt) == (OccurrenceState.DEAD, 3)


async def test_http_200_succeeds_once_and_never_runs_again(
    harness: Harness, http_target: Any
) -> None:
    base, seen = http_target
    job = await harness.client.create_job({
        "name": "good-hook", "schedule": {"at": rfc3339(START)}, "kind": "http",
        "payload": {"method": "POST", "url": f"{base}/ok", "body": {"a": 1}},
    })
    await harness.tick()
    done = await harness.completed()
    assert done.state is OccurrenceState.SUCCEEDED
    for _ in range(5):
        await harness.tick(30)
    assert len(seen) == 1
    assert (await harness.store.occurrence_get(job.id, START)).attempt == 1


async def test_full_jitter_backoff_stays_under_its_ceiling(harness: Harness) -> None:
    path = harness.tmp / "ledger.jsonl"
    await harness.client.create_job(ledger_job(
        "flaky", path, {"at": rfc3339(START)}, kwargs={"fail_attempts": 9},
        retry={"max_attempts": 4, "backoff_base_seconds": 10, "backoff_max_seconds": 25}))
    await harness.tick()
    for ceiling in (10, 20, 25):
        c = await harness.completed()
        delay = (c.due_at - c.finished_at).total_seconds()  # type: ignore[operator]
        assert 0 <= delay <= ceiling
        await harness.tick(ceiling)
    assert (await harness.completed()).state is OccurrenceState.DEAD
    assert [r["attempt"] for r in ledger.read(path)] == [1, 2, 3, 4]


async def test_shell_jobs_are_refused_unless_enabled(harness: Harness) -> None:
    job = await harness.client.create_job({
        "name": "shell", "schedule": {"at": rfc3339(START)}, "kind": "shell",
        "payload": {"command": [sys.executable, "-c", "print('hi')"]}})
    await harness.tick()
    done = await harness.completed()
    assert done.state is OccurrenceState.DEAD
    assert done.error is not None
    assert "shell jobs are disabled" in done.error
    assert (await harness.store.occurrence_get(job.id, START)).attempt == 1


async def test_timeout_ends_the_attempt_as_timed_out_and_retries(harness: Harness) -> None:
    name = "forever-timeout"
    EVENTS[f"{name}:started"] = threading.Event()
    EVENTS[name] = threading.Event()
    await harness.client.create_job({
        "name": "hangs", "schedule": {"at": rfc3339(START)}, "kind": "python",
        "payload": {"callable": "tickwork.testing.jobs:wait_forever", "args": [name]},
        "timeout_seconds": 5, "retry": {"max_attempts": 2, "jitter": "none"}})
    await harness.tick()
    assert await asyncio.to_thread(EVENTS[f"{name}:started"].wait, 10)
    harness.clock.advance(5)
    done = await harness.completed()
    assert (done.outcome, done.state) == (AttemptOutcome.TIMED_OUT, OccurrenceState.RETRYING)
    assert done.error == "timed out after 5s"
    assert EVENTS[name].is_set()  # the coroutine was cancelled, not left running


async def test_shell_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        "import subprocess, sys, time, pathlib\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"pathlib.Path({str(pids)!r}).write_text(f'{{child.pid}}')\n"
        "time.sleep(60)\n"
    )
    async with make_harness(tmp_path, clock=SystemClock(), shell_enabled=True,
                            shell_allowed_executables=(sys.executable,),
                            shell_allowed_arguments=(f"{sys.executable}=(?s).*",)) as h:
        now = h.clock.now()
        await h.client.create_job({
            "name": "sleepy-shell", "schedule": {"at": rfc3339(now)}, "kind": "shell",
            "payload": {"command": [sys.executable, "-c", script]},
            "timeout_seconds": 1, "retry": {"max_attempts": 1}})
        await h.tick()
        done = await h.completed()
    assert done.outcome is AttemptOutcome.TIMED_OUT
    grandchild = int(pids.read_text())
    assert await _gone(grandchild), f"grandchild {grandchild} outlived the timeout"


async def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether ``pid`` is dead (or a zombie awaiting its reaper) within ``within`` seconds.
    A non-child's death raises no event here, so this checks a bounded number of times."""
    for _ in range(int(within / 0.05)):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        await asyncio.sleep(0.05)
    return False
