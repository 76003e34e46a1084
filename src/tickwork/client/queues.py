"""The client's queues, their limits (docs/limits.md) and the stats. A mixin of
``AsyncClient``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tickwork.clock import Clock
from tickwork.document import QUEUE_NAME, QUEUE_NAME_RULE
from tickwork.document.limits import Limits, limit_name
from tickwork.drivers.admin import (
    QueueInfo,
    QueueListParams,
    QueueSetPausedParams,
    Stats,
    StatsParams,
)
from tickwork.drivers.limits import KeyLimitInfo, KeyLimitSetParams, QueueLimitsSetParams
from tickwork.errors import ValidationError

if TYPE_CHECKING:
    from tickwork.drivers.admin import AdminStore


class QueueMethods:
    clock: Clock
    namespace: str | None

    if TYPE_CHECKING:  # AsyncClient's
        @property
        def admin(self) -> AdminStore: ...

        def _changed(self) -> None: ...

    # -- queues and stats --------------------------------------------------------------------

    async def list_queues(self) -> list[QueueInfo]:
        """Every queue (they are shared); its counts are of this client's namespace's jobs
        when it sees one namespace, else of the whole store."""
        return await self.admin.queue_list(QueueListParams(now=self.clock.now(),
                                                           namespace=self.namespace))

    async def pause_queue(self, name: str) -> QueueInfo:
        """Stop claims from this queue (running attempts finish); planning goes on."""
        return await self._set_queue_paused(name, paused=True)

    async def resume_queue(self, name: str) -> QueueInfo:
        info = await self._set_queue_paused(name, paused=False)
        self._changed()
        return info

    async def _set_queue_paused(self, name: str, *, paused: bool) -> QueueInfo:
        if not QUEUE_NAME.fullmatch(name):
            raise ValidationError("queue", QUEUE_NAME_RULE)
        return await self.admin.queue_set_paused(
            QueueSetPausedParams(name=name, paused=paused, now=self.clock.now()))

    # -- limits (docs/limits.md) -------------------------------------------------------------

    async def set_queue_limits(self, name: str, limits: Limits) -> QueueInfo:
        """Replace a queue's limits (a value left None is no limit); its bucket starts full."""
        limit_name(name, "queue")
        now = self.clock.now()
        await self.admin.queue_limits_set(QueueLimitsSetParams(
            name=name, now=now, max_running=limits.max_running, rate=limits.rate,
            burst=limits.burst))
        self._changed()  # a raised limit: workers look again
        return next(q for q in await self.admin.queue_list(QueueListParams(now=now))
                    if q.name == name)

    async def list_limits(self) -> list[KeyLimitInfo]:
        return await self.admin.key_limit_list(self.clock.now())

    async def set_limit(self, key: str, limits: Limits) -> KeyLimitInfo:
        limit_name(key, "key")
        if limits.rate is None:
            raise ValidationError("rate", "is required")
        info = await self.admin.key_limit_set(KeyLimitSetParams(
            key=key, rate=limits.rate, now=self.clock.now(), burst=limits.burst))
        self._changed()
        return info

    async def delete_limit(self, key: str) -> None:
        """Raises LimitNotFound."""
        await self.admin.key_limit_delete(key)
        self._changed()

    async def stats(self, window_seconds: int = 3600) -> Stats:
        """The counts of this client's namespace when it sees one, else of the whole store."""
        return await self.admin.stats_get(
            StatsParams(now=self.clock.now(), window_seconds=window_seconds,
                        namespace=self.namespace))
