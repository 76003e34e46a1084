"""The client's queues, their limits (docs/limits.md) and the stats. A mixin of
``AsyncClient``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tickwork.client.owners import may_change
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
from tickwork.drivers.limits import (
    KEEP,
    KEY_BUCKET,
    QUEUE_BUCKET,
    KeyLimitInfo,
    KeyLimitSetParams,
    Owner,
    QueueLimitsSetParams,
    check_owner,
)
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
        """Every queue, with its counts of this client's namespace's jobs when it sees one
        (and then without the queues other namespaces own), else of the whole store."""
        return await self.admin.queue_list(QueueListParams(now=self.clock.now(),
                                                           namespace=self.namespace))

    async def pause_queue(self, name: str) -> QueueInfo:
        """Stop claims from this queue (running attempts finish); planning goes on. A client
        of one namespace pauses only the queues its namespace owns (client/owners.py)."""
        return await self._set_queue_paused(name, paused=True)

    async def resume_queue(self, name: str) -> QueueInfo:
        info = await self._set_queue_paused(name, paused=False)
        self._changed()
        return info

    async def _set_queue_paused(self, name: str, *, paused: bool) -> QueueInfo:
        if not QUEUE_NAME.fullmatch(name):
            raise ValidationError("queue", QUEUE_NAME_RULE)
        await self._may_change(QUEUE_BUCKET, name)
        return await self.admin.queue_set_paused(
            QueueSetPausedParams(name=name, paused=paused, now=self.clock.now()))

    async def _may_change(self, kind: str, name: str, owner: Owner = KEEP) -> None:
        if self.namespace is not None:
            may_change(await self.admin.limit_owners(), kind, name, self.namespace, owner)

    # -- limits (docs/limits.md) -------------------------------------------------------------

    async def set_queue_limits(self, name: str, limits: Limits, *,
                               namespace: Owner = KEEP) -> QueueInfo:
        """Replace a queue's limits (a value left None is no limit); its bucket starts full.
        ``namespace``: the namespace that owns the queue from now on, or None to share it
        (only a client without a namespace changes it); KEEP leaves the owner as it is."""
        limit_name(name, "queue")
        owner = check_owner(namespace)
        await self._may_change(QUEUE_BUCKET, name, owner)
        now = self.clock.now()
        await self.admin.queue_limits_set(QueueLimitsSetParams(
            name=name, now=now, max_running=limits.max_running, rate=limits.rate,
            burst=limits.burst, namespace=None if owner is KEEP else owner,
            set_namespace=owner is not KEEP))
        self._changed()  # a raised limit: workers look again
        return next(q for q in await self.admin.queue_list(QueueListParams(now=now))
                    if q.name == name)

    async def list_limits(self) -> list[KeyLimitInfo]:
        """Every named limit; to a client of one namespace, its own and the shared ones."""
        return await self.admin.key_limit_list(self.clock.now(), self.namespace)

    async def set_limit(self, key: str, limits: Limits, *,
                        namespace: Owner = KEEP) -> KeyLimitInfo:
        """Create or change a named limit; ``namespace`` as ``set_queue_limits``'."""
        limit_name(key, "key")
        if limits.rate is None:
            raise ValidationError("rate", "is required")
        owner = check_owner(namespace)
        await self._may_change(KEY_BUCKET, key, owner)
        info = await self.admin.key_limit_set(KeyLimitSetParams(
            key=key, rate=limits.rate, now=self.clock.now(), burst=limits.burst,
            namespace=None if owner is KEEP else owner, set_namespace=owner is not KEEP))
        self._changed()
        return info

    async def delete_limit(self, key: str) -> None:
        """Raises LimitNotFound (NotInNamespace for a key another namespace owns)."""
        await self._may_change(KEY_BUCKET, key)
        await self.admin.key_limit_delete(key)
        self._changed()

    async def stats(self, window_seconds: int = 3600) -> Stats:
        """The counts of this client's namespace when it sees one, else of the whole store."""
        return await self.admin.stats_get(
            StatsParams(now=self.clock.now(), window_seconds=window_seconds,
                        namespace=self.namespace))
