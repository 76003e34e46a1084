"""Ending background tasks for good.

On Python 3.11 a cancellation can be lost: ``asyncio.wait_for``, and the timeouts redis-py
wraps around each send and read, drop one that arrives just as the call they guard completes.
A loop around such a call then goes on as if nothing had happened, and whoever waits for it
to end waits for ever (a worker that outlives SIGTERM). So a task being stopped is cancelled
again until it has ended.
"""

from __future__ import annotations

import asyncio
from typing import Any

STOP_RECHECK_SECONDS = 0.1


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None,
                          within: float | None = None) -> list[asyncio.Task[Any]]:
    """Cancel each task (None is skipped) and return once all have ended, cancelling any
    that is still running every ``STOP_RECHECK_SECONDS``. Their exceptions are not raised.

    With ``within``, give up after that many seconds: the tasks still running then (code
    that catches every cancellation and goes on) are returned, left to themselves; else []."""
    loop = asyncio.get_running_loop()
    deadline = None if within is None else loop.time() + within
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    pending = {t for t in live if not t.done()}
    while pending:
        wait = STOP_RECHECK_SECONDS if deadline is None else max(
            0.0, min(STOP_RECHECK_SECONDS, deadline - loop.time()))
        _, pending = await asyncio.wait(pending, timeout=wait)
        if pending and deadline is not None and loop.time() >= deadline:
            break
        for task in pending:
            task.cancel()
    await asyncio.gather(*(t for t in live if t not in pending), return_exceptions=True)
    return [t for t in live if t in pending]
