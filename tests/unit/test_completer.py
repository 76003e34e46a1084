"""A run hands its result to the completer and ends; the completer settles its delivery once
the store has answered, and a stop waits for a settling that needs a call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tickwork.drivers.base import Completion
from tickwork.models import AttemptOutcome, Claim, OccurrenceState, rfc3339
from tickwork.testing.harness import START, make_harness
from tickwork.worker.sources import ClaimSource


class SlowSettling:
    """The pool's source, whose settling of each run is a call that waits for ``release``
    (as re-arming a retry in Redis does)."""

    def __init__(self, inner: ClaimSource) -> None:
        self.inner = inner
        self.settled: list[tuple[str, bool]] = []
        self.release = asyncio.Event()
        self.finished = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def settle(self, claim: Claim, completion: Completion, applied: bool) -> Any:
        self.settled.append((claim.job.spec.name, applied))

        async def call() -> None:
            await self.release.wait()
            self.finished += 1

        return call()


def _job(name: str) -> dict[str, object]:
    return {"name": name, "schedule": {"at": rfc3339(START)}, "kind": "python",
            "payload": {"callable": "tickwork.testing.jobs:nothing"}}


async def test_a_run_ends_before_its_delivery_is_settled_and_a_stop_waits_for_it(
        tmp_path: Path) -> None:
    async with make_harness(tmp_path) as h:
        source = SlowSettling(h.pool.source)
        h.pool.source = source  # type: ignore[assignment]
        await h.client.create_job(_job("settled"))
        await h.tick()
        done = await h.completed()
        assert done.state is OccurrenceState.SUCCEEDED
        await asyncio.sleep(0)  # the completer calls settle right after on_written
        assert source.settled == [("settled", True)]
        assert h.pool.running_count == 0  # the slot is free while the settling waits
        stopping = asyncio.create_task(h.pool.stop(grace_seconds=0))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not stopping.done()
        source.release.set()
        await stopping
        assert source.finished == 1


async def test_the_completer_tells_each_handed_over_result_whether_it_was_applied(
        tmp_path: Path) -> None:
    async with make_harness(tmp_path) as h:
        job = await h.client.create_job(_job("told"))
        stale = Completion(job_id=job.id, scheduled_at=START, attempt=7,
                           state=OccurrenceState.SUCCEEDED, outcome=AttemptOutcome.SUCCEEDED,
                           started_at=START, finished_at=START)
        told: asyncio.Queue[bool] = asyncio.Queue()
        h.pool.completer.hand_over(stale, told.put_nowait)
        assert await asyncio.wait_for(told.get(), 10) is False  # no such attempt runs


async def test_a_callback_that_raises_does_not_keep_the_others_from_being_told(
        tmp_path: Path) -> None:
    async with make_harness(tmp_path) as h:
        job = await h.client.create_job(_job("raising"))
        told: list[bool] = []

        def raises(applied: bool) -> None:
            raise RuntimeError("a bug in a callback")

        for attempt in (7, 8):
            stale = Completion(job_id=job.id, scheduled_at=START, attempt=attempt,
                               state=OccurrenceState.SUCCEEDED,
                               outcome=AttemptOutcome.SUCCEEDED, started_at=START,
                               finished_at=START)
            h.pool.completer.hand_over(stale, raises if attempt == 7 else told.append)
        late = Completion(job_id=job.id, scheduled_at=START, attempt=9,
                          state=OccurrenceState.SUCCEEDED, outcome=AttemptOutcome.SUCCEEDED,
                          started_at=START, finished_at=START)
        assert await asyncio.wait_for(h.pool.completer.submit(late), 10) is False
        assert told == [False]
