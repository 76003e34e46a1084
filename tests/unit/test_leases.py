"""Leases in the worker: heartbeats keep long jobs alive; a lost lease stops the job."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from tickwork.drivers.base import Completion
from tickwork.models import AttemptOutcome, Claim, OccurrenceState, rfc3339
from tickwork.scheduler.rescuer import Rescuer
from tickwork.testing.harness import START, Harness, make_harness
from tickwork.testing.jobs import CANCELS, EVENTS


def hanging_job(name: str, **extra: object) -> dict[str, object]:
    EVENTS[f"{name}:started"] = threading.Event()
    EVENTS[name] = threading.Event()
    return {"name": name, "schedule": {"at": rfc3339(START)}, "kind": "python",
            "payload": {"callable": "tickwork.testing.jobs:wait_forever", "args": [name]},
            "timeout_seconds": 600, **extra}


async def started(name: str) -> None:
    assert await asyncio.to_thread(EVENTS[f"{name}:started"].wait, 10)


async def test_heartbeats_keep_a_long_job_from_being_rescued(harness: Harness) -> None:
    job = await harness.client.create_job(hanging_job("long-lease"))
    await harness.tick()
    await started("long-lease")
    first = (await harness.store.occurrence_get(job.id, START)).lease_until
    assert first is not None
    assert first >= START + timedelta(seconds=600)  # never shorter than the timeout

    for _ in range(5):  # well within the timeout, beat after beat
        harness.clock.advance(100)
        assert await harness.pool.heartbeat_once(harness.clock.now()) == []
        assert await harness.rescuer.run_once(harness.clock.now()) == []
    occ = await harness.store.occurrence_get(job.id, START)
    assert occ.state is OccurrenceState.RUNNING
    assert occ.lease_until is not None
    assert occ.lease_until >= harness.clock.now() + timedelta(seconds=600)


def rescuer_that_thinks_w1_is_dead(harness: Harness) -> Rescuer:
    """A rescuer whose process holds the store's lock: w1's leases are orphans to it."""
    return Rescuer(store=harness.store, clock=harness.clock, sole_worker="another-worker")


async def test_a_worker_whose_lease_was_taken_stops_the_job(harness: Harness) -> None:
    job = await harness.client.create_job(hanging_job("silent", retry={"max_attempts": 2}))
    await harness.tick()
    await started("silent")
    [rescued] = await rescuer_that_thinks_w1_is_dead(harness).run_once(harness.clock.now())
    assert (rescued.job_id, rescued.attempt, rescued.state) == (
        job.id, 1, OccurrenceState.RETRYING)
    # The old worker learns it at its next heartbeat and stops the job, without a result.
    lost = await harness.pool.heartbeat_once(harness.clock.now())
    assert [(r.job_id, r.attempt) for r in lost] == [(job.id, 1)]
    assert await asyncio.to_thread(EVENTS["silent"].wait, 10)
    attempts = await harness.store.attempt_list(job.id, START)
    # Attempt 1 ended crashed, with no result from the worker; its retry, due at once, may
    # already run here (the freed slot wakes the claimer).
    assert [a.outcome.value if a.outcome else None for a in attempts[:1]] == ["crashed"]
    assert [a.number for a in attempts] in ([1], [1, 2])


async def test_a_worker_that_claims_the_retry_of_its_own_rescued_run_still_stops_the_old(
        harness: Harness) -> None:
    # The rescued attempt is due again at once; this worker claims attempt 2 before its
    # next heartbeat tells it attempt 1 is gone. Both run here, each tracked on its own.
    job = await harness.client.create_job(hanging_job("twice", retry={"max_attempts": 3}))
    await harness.tick()
    await started("twice")
    await rescuer_that_thinks_w1_is_dead(harness).run_once(harness.clock.now())
    EVENTS["twice:started"] = threading.Event()
    await harness.tick()
    await started("twice")
    assert harness.pool.running_count == 2
    dropped: list[int] = []
    settle = harness.pool.source.dropped

    async def record_dropped(claim: Claim) -> None:
        dropped.append(claim.occurrence.attempt)
        await settle(claim)

    harness.pool.source.dropped = record_dropped  # type: ignore[method-assign]

    lost = await harness.pool.heartbeat_once(harness.clock.now())
    assert [(r.job_id, r.attempt) for r in lost] == [(job.id, 1)]
    assert await asyncio.to_thread(EVENTS["twice"].wait, 10)  # one of the two ended ...
    assert harness.pool.running_count == 1
    # ... attempt 1: attempt 2 goes on, and its heartbeats with it; the source settled 1
    assert dropped == [1]
    assert await harness.pool.heartbeat_once(harness.clock.now()) == []
    occ = await harness.store.occurrence_get(job.id, START)
    assert (occ.state, occ.attempt) == (OccurrenceState.RUNNING, 2)


async def test_deleting_a_job_stops_its_running_attempt(harness: Harness) -> None:
    job = await harness.client.create_job(hanging_job("doomed"))
    await harness.tick()
    await started("doomed")
    await harness.client.delete_job(job.id)
    lost = await harness.pool.heartbeat_once(harness.clock.now())
    assert [r.job_id for r in lost] == [job.id]
    assert await asyncio.to_thread(EVENTS["doomed"].wait, 10)
    occ = await harness.store.occurrence_get(job.id, START)
    assert occ.state is OccurrenceState.CANCELLED
    assert harness.pool.running_count == 0


async def test_cancel_previous_stops_the_running_one_and_starts_the_new(harness: Harness) -> None:
    name = "replaced"
    EVENTS[f"{name}:started"] = threading.Event()
    EVENTS[name] = threading.Event()
    job = await harness.client.create_job({
        "name": name, "schedule": {"every": "10s"}, "kind": "python",
        "payload": {"callable": "tickwork.testing.jobs:wait_forever", "args": [name]},
        "timeout_seconds": 600, "overlap": "cancel_previous"})
    await harness.tick()
    await started(name)
    EVENTS[f"{name}:started"].clear()
    await harness.tick(10)
    await started(name)  # the second occurrence is running...
    assert await asyncio.to_thread(EVENTS[name].wait, 10)  # ...and the first was stopped
    first = await harness.store.occurrence_get(job.id, START)
    second = await harness.store.occurrence_get(job.id, START + timedelta(seconds=10))
    assert first.state is OccurrenceState.CANCELLED
    assert second.state is OccurrenceState.RUNNING


async def test_a_stale_result_is_fenced_off(tmp_path: Path) -> None:
    # One slot, taken by attempt 1: the retry the rescue makes (due at once) stays waiting.
    async with make_harness(tmp_path, queues=(("default", 1),)) as harness:
        job = await harness.client.create_job(hanging_job("stale", retry={"max_attempts": 3}))
        await harness.tick()
        await started("stale")
        await rescuer_that_thinks_w1_is_dead(harness).run_once(harness.clock.now())
        now = harness.clock.now()
        late = Completion(job_id=job.id, scheduled_at=START, attempt=1,
                          state=OccurrenceState.SUCCEEDED, outcome=AttemptOutcome.SUCCEEDED,
                          started_at=START, finished_at=now)
        assert await harness.pool.completer.submit(late) is False
        occ = await harness.store.occurrence_get(job.id, START)
        assert (occ.state, occ.attempt) == (OccurrenceState.RETRYING, 1)


async def test_a_wake_up_while_the_queue_is_full_does_not_spin(tmp_path: Path) -> None:
    """A full queue cannot act on a wake-up; the fetcher must go back to sleep, not loop
    without yielding (which would starve every other task on the event loop)."""
    async with make_harness(tmp_path, queues=(("default", 1),)) as h:
        await h.client.create_job(hanging_job("fills-the-queue"))
        await h.tick()
        await started("fills-the-queue")
        assert h.pool.running_count == 1
        for _ in range(3):
            h.pool.wake()
            # With a spinning fetcher this never returns: the loop is never free again.
            await asyncio.wait_for(asyncio.to_thread(lambda: None), 5)
        assert h.pool.running_count == 1


async def test_a_rescue_is_a_warning_when_retried_and_an_error_when_crashed(
        harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="tickwork.rescuer")
    await harness.client.create_job(hanging_job("again", retry={"max_attempts": 2}))
    await harness.client.create_job(hanging_job("once", retry={"max_attempts": 1}))
    await harness.tick()
    await started("again")
    await started("once")
    rescued = await rescuer_that_thinks_w1_is_dead(harness).run_once(harness.clock.now())
    assert sorted(r.state.value for r in rescued) == ["crashed", "retrying"]
    levels = {r.getMessage().rsplit("now ", 1)[1]: r.levelname for r in caplog.records
              if r.getMessage().startswith("rescued ")}
    assert levels == {"retrying": "WARNING", "crashed": "ERROR"}
    EVENTS["again"].set()
    EVENTS["once"].set()


async def test_a_stop_goes_on_without_a_job_that_ignores_its_cancellation(
        harness: Harness) -> None:
    """After the grace period the stop cancels what still runs, again and again; a job that
    catches every cancellation is left behind after ``abandon_seconds``, its lease released
    without charging its attempt, rather than keeping the worker from ever exiting."""
    name = "stubborn"
    EVENTS[f"{name}:started"] = threading.Event()
    EVENTS[name] = threading.Event()
    job = await harness.client.create_job({
        "name": name, "schedule": {"at": rfc3339(START)}, "kind": "python",
        "payload": {"callable": "tickwork.testing.jobs:ignore_cancellation", "args": [name]},
        "timeout_seconds": 600})
    await harness.tick()
    await started(name)
    harness.pool.abandon_seconds = 0.5
    try:
        await asyncio.wait_for(harness.pool.stop(grace_seconds=0), 5)  # the job: 10 s
        assert CANCELS[name] >= 2  # cancelled, then cancelled again
        occ = await harness.store.occurrence_get(job.id, START)
        assert (occ.state, occ.attempt, occ.lease_until) == (OccurrenceState.SCHEDULED, 0, None)
    finally:
        EVENTS[name].set()
        await asyncio.sleep(0.05)  # the job sees it and ends
