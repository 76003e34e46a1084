"""``tickwork scheduler``: plans the jobs of the shards it leases, rescues expired leases,
prunes history and, with Redis, promotes due keys and repairs Redis from the store.

Any number may run against one PostgreSQL database; each plans the shards it holds a lease on
(leases save work, they do not make anything correct: DESIGN rule 4).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from tickwork.clock import Clock
from tickwork.config import Settings
from tickwork.drivers import POSTGRES, safe_url
from tickwork.drivers.postgres.notify import SHARDS_CHANNEL, NotifyListener
from tickwork.errors import DispatchError
from tickwork.metrics import DEGRADED, REDIS, SCHEDULER, Family, mode_family
from tickwork.runtime import assemble
from tickwork.runtime.base import Process, Stoppable
from tickwork.runtime.eventloop import loop_name
from tickwork.runtime.shared import open_shared_driver
from tickwork.scheduler.loop import Loop
from tickwork.scheduler.shards import ShardLeaser

log = logging.getLogger("tickwork.distributed")
PROBE_SECONDS = 1.0  # a scheduler's /healthz and /metrics wait this long for Redis' answer


class SchedulerProcess(Process):
    kind = "scheduler"

    def __init__(self, settings: Settings, *, clock: Clock | None = None,
                 scheduler_id: str | None = None) -> None:
        s = settings
        # A connection for each planner lane, and for the leaser, rescuer, pruner and alerts.
        driver = open_shared_driver(s, shard_count=s.shard_count,
                                    max_pool_size=4 + s.planner_lanes)
        super().__init__(s, driver, clock)
        self.postgres = driver.store  # the shard-lease and history seams are PostgreSQL's
        self.id = scheduler_id or f"scheduler-{uuid.uuid4().hex[:8]}"
        self.dispatch = assemble.open_dispatch(s)
        self.redis = None if self.dispatch is None else assemble.scheduler_dispatch(
            store=self.store, dispatch=self.dispatch, clock=self.clock, metrics=self.metrics,
            settings=self.settings)
        # Shard leases are short and renewed every third of their length, apart from the
        # run leases (sized for jobs): a killed scheduler's shards move within seconds.
        self.leaser = ShardLeaser(store=self.postgres, clock=self.clock, owner=self.id,
                                  lease_seconds=s.shard_lease_seconds,
                                  on_gained=self._plan_now)
        self.planner = assemble.planner(s, store=self.store, clock=self.clock,
                                        metrics=self.metrics, redis=self.redis,
                                        shards=self.leaser.shards)
        # Never sole_worker here: other processes' leases are only orphans once they expire.
        self.rescuer = assemble.rescuer(s, store=self.store, clock=self.clock,
                                        metrics=self.metrics, redis=self.redis)
        # Alerts of the jobs of the shards this scheduler leases: each job is judged by one
        # scheduler at a time, and the store records one firing alert per job and condition
        # should two judge it during a handover.
        self.executors, self.secrets = assemble.executors(s.executors, driver)
        self.alerts = assemble.alert_loops(s, store=self.store, clock=self.clock,
                                           executors=self.executors, shards=self.leaser.shards)
        self.vacuumer = assemble.vacuumer(store=self.postgres, clock=self.clock)
        self.pruner = assemble.pruner(s, store=self.postgres, clock=self.clock,
                                      metrics=self.metrics, vacuumer=self.vacuumer)
        # A scheduler stopping gives its shards back and says so: take them now, not at the
        # next lease pass, so they are never left unplanned for seconds.
        self.listener = NotifyListener(s.database, lambda _: self.leaser.wake(),
                                       clock=self.clock, channel=SHARDS_CHANNEL)
        self._started = False

    async def start(self) -> None:
        await self.driver.migrate()
        now = self.clock.now()
        await self.pruner.run_once(now)  # today's partitions exist before anything runs
        await self.leaser.run_once(now)
        self._started = True
        if self.dispatch is not None:
            await self.dispatch.check_settings()
        for loop in (self.leaser, self.planner, self.rescuer, self.pruner, self.vacuumer,
                     *self.alerts, *self._redis_loops()):
            loop.start()
        self.listener.start()
        await self.serve_metrics()
        log.info("tickwork scheduler is running: database %s, scheduler %s, %d of %d shards%s, "
                 "event loop %s", safe_url(self.settings.database), self.id,
                 len(self.leaser.held), await self.postgres.shard_count(),
                 ", dispatch redis" if self.redis else "", loop_name())

    def _plan_now(self) -> None:
        """The leaser took shards: plan their jobs now, not at the planner's next pass."""
        self.planner.wake()

    def _redis_loops(self) -> tuple[Loop, ...]:
        return self.redis.loops() if self.redis is not None else ()

    def loops(self) -> tuple[Stoppable, ...]:
        return (self.listener, self.planner, self.rescuer, self.pruner, self.vacuumer,
                *self.alerts, *self._redis_loops())

    async def _stop_more(self) -> None:
        if self._started:
            await self.leaser.stop()  # gives the shards back at once

    async def stop(self) -> None:
        log.info("stopping scheduler %s", self.id)
        await super().stop()

    async def _mode(self) -> str:
        """``postgres`` without Redis; else ``redis`` if it answers within PROBE_SECONDS,
        ``degraded`` if not (planning goes on into the store; workers claim from it)."""
        if self.dispatch is None:
            return POSTGRES
        try:
            ok = (await asyncio.wait_for(self.dispatch.health(), PROBE_SECONDS)).ok
        except (TimeoutError, DispatchError):
            ok = False
        return REDIS if ok else DEGRADED

    async def health(self) -> dict[str, Any]:
        return await self.health_of(await self._mode(), id=self.id,
                                    shards=len(self.leaser.held))

    async def metrics_text(self) -> str:
        extra = [Family("tickwork_shard_leases_held", "gauge",
                        "Job shards this scheduler holds a lease on (it plans their jobs).",
                        [({}, len(self.leaser.held))])]
        if self.redis is not None:
            extra += [mode_family(await self._mode(), (REDIS, DEGRADED)),
                      Family("tickwork_due_add_failed_total", "counter",
                             "Occurrences whose due_add to Redis failed (the reconciler "
                             "re-adds them).", [({}, self.redis.feeder.failed)])]
        return self.metrics.render_process(SCHEDULER, extra)
