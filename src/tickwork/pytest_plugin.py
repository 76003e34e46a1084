"""tickwork's pytest plugin, for the tests of projects that use tickwork.

Installed with tickwork (the ``pytest11`` entry point), it gives two fixtures:

- ``tickwork_eager``: an :class:`EagerRunner` that runs a ``python`` job inline, with the
  context a worker would give it, and returns what the function returned (``Fail``,
  ``Cancel`` and any other exception propagate as raised).
- ``tickwork_clock``: a :class:`TickworkClock`, a ``FakeClock`` that moves only when told to
  and says which fire times a job's schedule passed (``fired``, ``fired_between``). It starts
  at 2030-01-01T00:00:00Z, or where ``@pytest.mark.tickwork_clock("<RFC 3339>")`` says.

A job is given as the function decorated with ``@tickwork.job``, as its name, or as a job
document (a dict). This module, ``EagerRunner`` and ``TickworkClock`` are public; the
``tickwork.testing`` package is the project's own test harness and is not.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest

from tickwork import registry
from tickwork.clock import FakeClock
from tickwork.document import parse_instant, parse_job_document
from tickwork.executors.base import ExecutionContext
from tickwork.models import JobSpec, rfc3339
from tickwork.schedules import compile_schedule

__all__ = ["EagerRunner", "JobRef", "TickworkClock", "job_document"]

JobRef = Callable[..., Any] | str | Mapping[str, Any]
START = datetime.fromisoformat("2030-01-01T00:00:00+00:00")
MAX_FIRES = 100_000  # fired_between refuses a window with more fire times than this


def job_document(job: JobRef) -> dict[str, Any]:
    """The job document of a decorated function, of a declared job's name, or ``job`` itself."""
    if isinstance(job, Mapping):
        return dict(job)
    declared = registry.registered()
    if isinstance(job, str):
        for doc in declared:
            if doc["name"] == job:
                return doc
        raise LookupError(f"no job named {job!r} was declared with @tickwork.job "
                          "(is its module imported?)")
    target = f"{getattr(job, '__module__', '?')}:{getattr(job, '__qualname__', '?')}"
    for doc in declared:
        if doc["kind"] == "python" and doc["payload"].get("callable") == target:
            return doc
    raise LookupError(f"{target} is not declared with @tickwork.job; pass its job document")


def _spec(job: JobRef) -> JobSpec:
    return parse_job_document(job_document(job)).spec


class TickworkClock(FakeClock):
    """A FakeClock (pass it as ``clock=`` to a client or a service) that also tells which
    fire times of a job's schedule it passed. Fire times are the schedule's own, before any
    jitter; paused flags and catch-up windows are not looked at."""

    def __init__(self, start: datetime | None = None) -> None:
        super().__init__(start or START)
        self._window = (self.now(), self.now())

    def advance(self, seconds: float | timedelta) -> None:
        """Move forward by ``seconds`` (a number or a timedelta); ``fired`` then tells what
        fell in the step."""
        amount = seconds.total_seconds() if isinstance(seconds, timedelta) else seconds
        if amount < 0:
            raise ValueError("a TickworkClock never goes back")
        before = self.now()
        super().advance(amount)
        self._window = (before, self.now())

    def fired(self, job: JobRef) -> list[datetime]:
        """The fire times of ``job`` in the last ``advance`` (or ``set``): after the instant
        it started from, up to and including the one it reached."""
        return self.fired_between(job, *self._window)

    def fired_between(self, job: JobRef, start: datetime, end: datetime) -> list[datetime]:
        """The fire times of ``job`` after ``start``, up to and including ``end``: what a clock
        moving from ``start`` to ``end`` passes."""
        schedule = compile_schedule(_spec(job).schedule)
        found: list[datetime] = []
        at = schedule.next_after(start)
        while at is not None and at <= end:
            if len(found) == MAX_FIRES:
                raise ValueError(f"more than {MAX_FIRES} fire times between {rfc3339(start)} "
                                 f"and {rfc3339(end)}; ask for a shorter window")
            found.append(at)
            at = schedule.next_after(at)
        return found

    def next_fire(self, job: JobRef) -> datetime | None:
        """The first fire time of ``job`` after now, or None when it fires no more."""
        return compile_schedule(_spec(job).schedule).next_after(self.now())


class EagerRunner:
    """Runs ``python`` jobs inline, as a worker would call them, and returns their result."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock

    def run(self, job: JobRef, *, scheduled_at: datetime | str | None = None,
            attempt: int = 1) -> Any:
        """Run ``job`` and return its function's result. Its context is scheduled at
        ``scheduled_at`` (a datetime or RFC 3339), else at the clock's now. From async code
        (a running event loop), ``await run_async(...)`` instead."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run_async(job, scheduled_at=scheduled_at, attempt=attempt))
        raise RuntimeError("an event loop is running here: use 'await "
                           "tickwork_eager.run_async(...)'")

    async def run_async(self, job: JobRef, *, scheduled_at: datetime | str | None = None,
                        attempt: int = 1) -> Any:
        """``run`` for async code."""
        spec = _spec(job)
        if spec.kind != "python":
            raise TypeError(f"eager runs are for python jobs; {spec.name!r} is {spec.kind!r}")
        payload = json.loads(json.dumps(spec.payload))  # JSON in, as a worker receives it
        at = (parse_instant(scheduled_at, "scheduled_at") if scheduled_at is not None
              else self.clock.now() if self.clock else _now())
        ctx = ExecutionContext(
            job_id=spec.name, job_name=spec.name, kind="python", payload=payload,
            scheduled_at=at, attempt=attempt, max_attempts=spec.retry.max_attempts,
            idempotency_key=f"{spec.name}:{rfc3339(at)}",
            deadline=at + timedelta(seconds=spec.timeout_seconds),
            timeout_seconds=spec.timeout_seconds)
        func = _resolve(str(payload["callable"]))
        args = list(payload.get("args", []))
        kwargs = dict(payload.get("kwargs", {}))
        if "ctx" in _parameters(func):
            kwargs["ctx"] = ctx
        result = func(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


def _now() -> datetime:
    from tickwork.clock import SystemClock  # noqa: PLC0415  (only when no clock is given)

    return SystemClock().now()


def _resolve(target: str) -> Callable[..., Any]:
    module_name, _, path = target.partition(":")
    found: Any = importlib.import_module(module_name)
    for name in path.split("."):
        found = getattr(found, name)
    if not callable(found):
        raise TypeError(f"{target} is not callable")
    # @tickwork.job returns the function itself; functools.wraps chains lead to it as well
    return found  # type: ignore[no-any-return]  # Any from getattr, checked callable above


def _parameters(func: Callable[..., Any]) -> Mapping[str, inspect.Parameter]:
    try:
        return inspect.signature(func).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return {}


# -- the plugin ------------------------------------------------------------------------------

def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "tickwork_clock(start): where the tickwork_clock fixture starts (RFC 3339)")


@pytest.fixture
def tickwork_clock(request: pytest.FixtureRequest) -> TickworkClock:
    """A TickworkClock at 2030-01-01T00:00:00Z, or at ``@pytest.mark.tickwork_clock(start)``."""
    marker = request.node.get_closest_marker("tickwork_clock")
    if marker is None:
        return TickworkClock()
    return TickworkClock(parse_instant(marker.args[0], "tickwork_clock"))


@pytest.fixture
def tickwork_eager(tickwork_clock: TickworkClock) -> EagerRunner:
    """An EagerRunner whose runs are scheduled at ``tickwork_clock``'s now."""
    return EagerRunner(tickwork_clock)
