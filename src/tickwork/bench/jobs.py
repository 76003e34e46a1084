"""The benchmark's no-op job, and the independent record it writes.

Delivery is judged from what the executed jobs write, never from the store's tables. Each
worker process appends to a file of its own, ``<record dir>/<pid>.rec``, one line per
execution::

    <idempotency key> TAB <attempt> TAB <scheduled_at, unix us> TAB <started, unix us> LF

Instants are whole microseconds since the epoch: an integer is written for a few hundred
instructions, a float with six decimals for thousands, and the job's own cost is what the
bench must keep out of tickwork's.

Fast enough for tens of thousands of executions a second: the job is ``async`` (it runs on
the worker's event loop, no thread hop), lines are buffered in memory and written with one
``write(2)`` (``O_APPEND``, no fsync) when ``BUFFER_LINES`` wait, ``FLUSH_SECONDS`` after the
first buffered line, and at interpreter exit (``atexit``). A worker stopped with SIGTERM
shuts down gracefully and exits normally, so nothing is lost; a worker killed with ``kill -9``
may lose its last ``FLUSH_SECONDS`` of lines, which is why the benchmark never kills one
(crash tests use ``tickwork.testing.ledger``, which fsyncs every line).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import time

from tickwork.drivers.dispatch import micros
from tickwork.executors.base import ExecutionContext

CALLABLE = "tickwork.bench.jobs:noop"
BUFFER_LINES = 2000
FLUSH_SECONDS = 0.1


class RecordWriter:
    """One process's record file; lines buffered, written by whole batches."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, f"{os.getpid()}.rec")
        self._lines: list[str] = []
        self._lock = threading.Lock()  # sync callers (threads) may share it with the loop
        self._timer: asyncio.TimerHandle | None = None
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        atexit.register(self.flush)

    def add(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)
            full = len(self._lines) >= BUFFER_LINES
        if full:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # called from a thread: write now
                self.flush()
                return
            self._timer = loop.call_later(FLUSH_SECONDS, self.flush)

    def flush(self) -> None:
        with self._lock:
            lines, self._lines = self._lines, []
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if lines:
            data = "".join(lines).encode()
            while data:  # a regular file takes it all at once; loop in case it does not
                written = os.write(self._fd, data)
                data = data[written:]


_writers: dict[str, RecordWriter] = {}


def writer_for(directory: str) -> RecordWriter:
    writer = _writers.get(directory)
    if writer is None:
        writer = _writers[directory] = RecordWriter(directory)
    return writer


def record_line(key: str, attempt: int, scheduled_us: int, started_us: int) -> str:
    return f"{key}\t{attempt}\t{scheduled_us}\t{started_us}\n"


async def noop(ctx: ExecutionContext, record: str) -> None:
    """Do nothing but note this execution in the record directory ``record``."""
    started = time.time_ns() // 1000
    writer_for(record).add(
        record_line(ctx.idempotency_key, ctx.attempt, micros(ctx.scheduled_at), started))


def payload(record: str) -> dict[str, object]:
    """The ``python`` payload of a benchmark job writing to ``record``."""
    return {"callable": CALLABLE, "kwargs": {"record": record}}
