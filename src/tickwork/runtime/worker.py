"""``tickwork worker``: claims due occurrences of its queues, runs them and records the result.

It claims straight from PostgreSQL, woken by NOTIFY, or, with Redis, from what Redis
delivers, falling back to the store while Redis is unreachable (degraded mode).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tickwork.clock import Clock
from tickwork.config import Settings
from tickwork.drivers import POSTGRES, safe_url
from tickwork.drivers.postgres.notify import NotifyListener
from tickwork.metrics import REDIS, WORKER, DispatchMode, Family
from tickwork.runtime import assemble
from tickwork.runtime.base import Process, Stoppable
from tickwork.runtime.eventloop import loop_name
from tickwork.runtime.shared import open_shared_driver

if TYPE_CHECKING:
    from tickwork.worker.redis_source import RedisClaimSource

log = logging.getLogger("tickwork.distributed")


class WorkerProcess(Process):
    kind = "worker"

    def __init__(self, settings: Settings, *, clock: Clock | None = None) -> None:
        s = settings
        # server_clock: a worker whose own clock runs fast still never starts a job early.
        super().__init__(s, open_shared_driver(s, server_clock=True,
                                               max_pool_size=min(20, 4 + 2 * len(s.queues))),
                         clock)
        self.dispatch = assemble.open_dispatch(s)
        self.source: RedisClaimSource | None = None
        self.listener: NotifyListener | None = None
        self.metrics.dispatch = DispatchMode(POSTGRES if self.dispatch is None else REDIS)

    async def start(self) -> None:
        s = self.settings
        await self.driver.migrate()
        self.executors, self.secrets = assemble.executors(s.executors, self.driver)
        worker = assemble.worker_id(s)
        if self.dispatch is not None:
            await self.dispatch.check_settings()
            self.source = assemble.redis_claim_source(
                s, store=self.store, dispatch=self.dispatch, clock=self.clock, worker=worker,
                metrics=self.metrics)
        self.pool = assemble.worker_pool(s, store=self.store, clock=self.clock,
                                         executors=self.executors, worker=worker,
                                         metrics=self.metrics, source=self.source)
        self.listener = NotifyListener(s.database, self.pool.wake, clock=self.clock)
        self.listener.start()
        self.pool.start()
        await self.serve_metrics()
        log.info("tickwork worker is running: database %s, queues %s, worker %s%s, "
                 "event loop %s", safe_url(s.database),
                 ", ".join(f"{q}:{c}" for q, c in s.queues), self.pool.worker_id,
                 ", dispatch redis" if self.source else "", loop_name())

    def loops(self) -> tuple[Stoppable, ...]:
        return () if self.listener is None else (self.listener,)

    async def stop(self) -> None:
        log.info("stopping: no new runs; waiting up to %gs for running ones",
                 self.settings.shutdown_grace_seconds)
        await super().stop()

    @property
    def mode(self) -> str:
        """``redis``, ``degraded`` (Redis unreachable: claiming from the store) or ``postgres``."""
        return self.source.mode if self.source is not None else POSTGRES

    async def health(self) -> dict[str, Any]:
        pool = self.pool
        return await self.health_of(self.mode, id=pool.worker_id if pool else None,
                                    running=pool.running_count if pool else 0)

    async def metrics_text(self) -> str:
        s = self.settings
        extra = [Family("tickwork_worker_running", "gauge", "Attempts running in this worker.",
                        [({}, self.pool.running_count if self.pool else 0)]),
                 Family("tickwork_worker_concurrency", "gauge",
                        "Attempts this worker runs at most at once, by queue.",
                        [({"queue": q}, c) for q, c in s.queues])]
        if self.source is not None:
            extra += [Family("tickwork_redis_reclaimed_total", "counter",
                             "Stream entries taken over from a consumer that died or hung.",
                             [({}, self.source.reclaimed)]),
                      Family("tickwork_redis_dead_lettered_total", "counter",
                             "Stream entries moved to the dead stream (delivered more than "
                             "max_deliveries times, or not an occurrence key).",
                             [({}, self.source.dead_lettered)])]
        return self.metrics.render_process(WORKER, extra)
