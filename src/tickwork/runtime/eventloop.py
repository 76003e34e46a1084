"""The event loop a tickwork process runs on: uvloop where it is installed, else asyncio's own.

A worker's runs are asyncio tasks, and each waits on psycopg's or redis-py's sockets: on uvloop
the loop's share of that (scheduling callbacks, registering readers) is C, and a worker spends
about a tenth less CPU per run (docs/benchmarks.md). uvloop is a dependency on every platform it
supports (not Windows). ``TICKWORK_EVENT_LOOP=asyncio`` runs on asyncio's loop instead.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from tickwork.errors import ConfigError

EVENT_LOOP_ENV = "TICKWORK_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")
T = TypeVar("T")


def loop_factory(environ: Mapping[str, str] = os.environ
                 ) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop, unless the environment asks for asyncio's or uvloop is not installed
    (None: asyncio's)."""
    choice = environ.get(EVENT_LOOP_ENV, "uvloop").strip().lower() or "uvloop"
    if choice not in CHOICES:
        raise ConfigError(EVENT_LOOP_ENV, f"{environ[EVENT_LOOP_ENV]!r} is not an event loop "
                          f"tickwork runs on: use {' or '.join(CHOICES)}")
    if choice == "asyncio":
        return None
    try:
        import uvloop  # noqa: PLC0415  (optional: not on Windows)
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], environ: Mapping[str, str] = os.environ) -> T:
    """``asyncio.run(main)`` on the chosen loop. A bad choice closes ``main`` unstarted."""
    try:
        factory = loop_factory(environ)
    except ConfigError:
        main.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def loop_name() -> str:
    """The running loop's kind, as ``TICKWORK_EVENT_LOOP`` names it."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.startswith("uvloop") else "asyncio"
