"""LISTEN on a dedicated connection and wake a worker's fetchers when work arrives.

Whatever inserts due work (the planner, a trigger, a retry, a rescue, a release) NOTIFYs the
channel ``tickwork_wake`` with the queue's name as payload, in the same transaction, so the
notification arrives when the rows are visible. Notifications are a hint: a worker still polls
every ``poll_interval_seconds``, so a lost notification (a dropped connection) costs latency,
never a run. After a reconnect every queue is woken once, for what may have been missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg
from psycopg import sql

from tickwork.clock import Clock, SystemClock
from tickwork.drivers import safe_url
from tickwork.drivers.postgres.connection import CONNECT_OPTIONS, libpq_url
from tickwork.tasks import cancel_and_wait

CHANNEL = "tickwork_wake"
SHARDS_CHANNEL = "tickwork_shards"  # a scheduler gave its shard leases back: take them now
log = logging.getLogger("tickwork.notify")


class NotifyListener:
    def __init__(self, url: str, on_wake: Callable[[str | None], None], *,
                 clock: Clock | None = None, retry_seconds: float = 1.0,
                 channel: str = CHANNEL) -> None:
        """``on_wake(queue)``: a queue has new work; ``on_wake(None)``: look at every queue.
        ``channel``: what to listen to (``SHARDS_CHANNEL``: schedulers; the payload names the
        scheduler that gave its shards back)."""
        self.url = libpq_url(url)
        self.channel = channel
        self.on_wake = on_wake
        self.clock = clock or SystemClock()
        self.retry_seconds = retry_seconds
        self.listening = asyncio.Event()  # set while LISTEN is in effect
        self._task: asyncio.Task[None] | None = None
        self._lost = False  # said so once; quiet until LISTEN works again

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="tickwork-notify")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self._listen()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # psycopg errors: reconnect; polling covers the gap
                self.listening.clear()
                if not self._lost:  # once per loss, not at every failed reconnection
                    log.info("notification listener on %s lost: %s; polling meanwhile, "
                             "reconnecting every %gs", safe_url(self.url),
                             str(exc).strip().splitlines()[0:1], self.retry_seconds)
                self._lost = True
            await self.clock.sleep(self.retry_seconds)

    async def _listen(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, options=CONNECT_OPTIONS, connect_timeout=10)
        try:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            self.listening.set()
            if self._lost:
                log.info("notification listener on %s listening again", safe_url(self.url))
                self._lost = False
            self.on_wake(None)
            async for note in conn.notifies():
                self.on_wake(note.payload or None)
        finally:
            self.listening.clear()
            await conn.close()


