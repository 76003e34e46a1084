"""Callables for ``python`` job tests: import path ``tickwork.testing.jobs:<name>``.

Each takes JSON arguments, as a real python job does. ``EVENTS`` lets a test and a sync job
running in a worker thread hand each other signals.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork.executors.base import ExecutionContext
from tickwork.models import idempotency_key
from tickwork.outcomes import Cancel, Fail, Success

EVENTS: dict[str, threading.Event] = {}
WAIT_LIMIT_SECONDS = 10.0  # a blocked job gives up here so a broken test cannot hang forever


SCHEDULED_AT = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def make_context(
    kind: str,
    payload: dict[str, Any],
    *,
    attempt: int = 1,
    timeout_seconds: float = 30.0,
    job_id: str = "job-1",
    job_name: str = "test-job",
) -> ExecutionContext:
    """An ExecutionContext for executor tests, scheduled at SCHEDULED_AT."""
    return ExecutionContext(
        job_id=job_id,
        job_name=job_name,
        kind=kind,
        payload=payload,
        scheduled_at=SCHEDULED_AT,
        attempt=attempt,
        max_attempts=3,
        idempotency_key=idempotency_key(job_id, SCHEDULED_AT),
        deadline=SCHEDULED_AT + timedelta(seconds=timeout_seconds),
        timeout_seconds=timeout_seconds,
    )


def add(a: int, b: int) -> int:
    return a + b


def greet(name: str, *, punctuation: str = "!") -> str:
    return f"hello {name}{punctuation}"


def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


def nothing() -> None:
    return None


def big(n: int) -> str:
    return "x" * n


async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


def with_ctx(label: str, ctx: ExecutionContext) -> dict[str, Any]:
    return {"label": label, "key": ctx.idempotency_key, "attempt": ctx.attempt}


async def async_with_ctx(*, ctx: ExecutionContext) -> str:
    return f"{ctx.job_name}#{ctx.attempt}"


def fail_fatal(reason: str) -> None:
    raise Fail(reason, retriable=False)


def fail_later(seconds: float) -> None:
    raise Fail("busy", retriable=True, retry_after=seconds)


def cancel(reason: str) -> None:
    raise Cancel(reason)


def returns_success() -> Success:
    return Success(output="explicit")


def boom(message: str) -> None:
    raise RuntimeError(message)


def leave() -> None:
    raise SystemExit(3)


def block_until(name: str) -> str:
    """Set ``EVENTS[name + ":started"]``, then block this thread until ``EVENTS[name]`` is set."""
    EVENTS[f"{name}:started"].set()
    if EVENTS[name].wait(WAIT_LIMIT_SECONDS):
        return "released"
    return "gave up waiting"


async def wait_forever(name: str) -> None:
    """Set ``EVENTS[name + ":started"]`` and wait until cancelled; then set ``EVENTS[name]``."""
    EVENTS[f"{name}:started"].set()
    try:
        await asyncio.Event().wait()
    finally:
        EVENTS[name].set()


CANCELS: dict[str, int] = {}


async def ignore_cancellation(name: str) -> None:
    """Set ``EVENTS[name + ":started"]``, then catch every cancellation (counted in
    ``CANCELS[name]``) and go on, until ``EVENTS[name]`` is set (or WAIT_LIMIT_SECONDS)."""
    EVENTS[f"{name}:started"].set()
    CANCELS[name] = 0
    loop = asyncio.get_running_loop()
    give_up = loop.time() + WAIT_LIMIT_SECONDS
    while not EVENTS[name].is_set() and loop.time() < give_up:
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            CANCELS[name] += 1


class Namespace:
    """A class whose static method is reached with a dotted attribute path."""

    @staticmethod
    def shout(text: str) -> str:
        return text.upper()


NOT_CALLABLE = 42
