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


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel each task (None is skipped) and return once all have ended, cancelling any
    that is still running every ``STOP_RECHECK_SECONDS``. Their exceptions are not raised."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    pending = {t for t in live if not t.done()}
    while pending:
        _, pending = await asyncio.wait(pending, timeout=STOP_RECHECK_SECONDS)
        for task in pending:
            task.cancel()
    await asyncio.gather(*live, return_exceptions=True)
