"""The postgres deployment's processes: ``tickwork scheduler`` and ``tickwork worker``.

Run as many of each as you like on one PostgreSQL database; none is special.

- A **scheduler** leases a fair share of the job shards (``scheduler/shards.py``), plans the
  jobs of its shards, rescues expired leases of any worker, and keeps history partitioned and
  pruned. A crashed scheduler's shards are taken over when its leases expire
  (``shard_lease_seconds``, 5 s by default).
- A **worker** claims due occurrences of its queues with ``FOR UPDATE SKIP LOCKED``, runs them,
  and writes results fenced on the attempt. It LISTENs for new work, and polls as a fallback.

Both stop gracefully on SIGTERM (G10), like the embedded service.

With ``--redis URL`` (the postgres + redis deployment, docs/redis.md) a scheduler also adds
what it plans to Redis' due sets and runs the promoter and the reconciler; a worker reads what
Redis delivers and claims those keys in the store, falling back to claiming straight from the
store while Redis is unreachable (degraded mode).

With ``--metrics-address HOST:PORT`` either serves its own /metrics and /healthz
(``api/process.py``): counters of what it did, and its dispatch mode.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tickwork.clock import Clock, SystemClock
from tickwork.config import Settings
from tickwork.drivers import open_driver, safe_url
from tickwork.drivers.postgres.notify import SHARDS_CHANNEL, NotifyListener
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.errors import ConfigError, DispatchError
from tickwork.executors import build_executors
from tickwork.executors.base import Executor
from tickwork.metrics import (
    DEGRADED,
    REDIS,
    SCHEDULER,
    WORKER,
    CountingPlanner,
    CountingSource,
    DispatchMode,
    Family,
    Metrics,
    mode_family,
)
from tickwork.models import Claim
from tickwork.scheduler.loop import Loop
from tickwork.scheduler.pruner import Pruner
from tickwork.scheduler.rescuer import Rescuer
from tickwork.scheduler.shards import ShardLeaser
from tickwork.secrets import SecretResolver
from tickwork.secrets import resolver_for as secret_resolver_for
from tickwork.worker.outcomes import Result
from tickwork.worker.pool import WorkerPool
from tickwork.worker.runlog import log_run

if TYPE_CHECKING:
    from tickwork.api.server import ApiServer
    from tickwork.drivers.base import Store
    from tickwork.drivers.redis.dispatch import RedisDispatch
    from tickwork.scheduler.dispatch import SchedulerDispatch
    from tickwork.scheduler.reconciler import Reconciled
    from tickwork.worker.redis_source import RedisClaimSource

log = logging.getLogger("tickwork.distributed")
POSTGRES = "postgres"  # the dispatch mode without Redis: claims straight from PostgreSQL
PROBE_SECONDS = 1.0  # a scheduler's /healthz and /metrics wait this long for Redis' answer


def _open_redis(settings: Settings) -> RedisDispatch | None:
    if settings.redis is None:
        return None
    from tickwork.drivers.redis.dispatch import RedisDispatch  # noqa: PLC0415  (needs the redis extra)

    return RedisDispatch.from_url(settings.redis)


def _require_postgres(settings: Settings) -> None:
    if not open_driver(settings.database).shared:
        raise ConfigError("database", "tickwork scheduler and tickwork worker share a "
                          "PostgreSQL database: use --database postgresql://... "
                          "(for one process on SQLite, use tickwork run)")


class _Process:
    kind = "process"

    def __init__(self, settings: Settings, clock: Clock | None) -> None:
        _require_postgres(settings)
        self.settings = settings
        self.clock = clock or SystemClock()
        self.metrics = Metrics()
        self.http: ApiServer | None = None  # /metrics and /healthz, with metrics_address

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def health(self) -> dict[str, Any]:
        raise NotImplementedError

    async def metrics_text(self) -> str:
        raise NotImplementedError

    async def _serve_metrics(self) -> None:
        if self.settings.metrics_address is None:
            return
        from tickwork.api.process import serve_process  # noqa: PLC0415  (FastAPI: only to serve)

        self.http = await serve_process(self, self.settings.metrics_address, self.kind)

    async def _stop_metrics(self) -> None:
        if self.http is not None:
            await self.http.stop()
            self.http = None

    async def _health(self, store: Store, mode: str, **fields: object) -> dict[str, Any]:
        from tickwork.api.process import status_of, store_reachable  # noqa: PLC0415

        store_ok = await store_reachable(store)
        return {"status": status_of(store_ok, mode), "role": self.kind, "mode": mode,
                "store": "ok" if store_ok else "unreachable", **fields}

    async def run_until_signalled(self) -> None:
        """Start, run until SIGTERM or SIGINT, then stop gracefully."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await self.start()
            await stop.wait()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            await self.stop()


class SchedulerProcess(_Process):
    kind = "scheduler"

    def __init__(self, settings: Settings, *, clock: Clock | None = None,
                 scheduler_id: str | None = None) -> None:
        super().__init__(settings, clock)
        self.id = scheduler_id or f"scheduler-{uuid.uuid4().hex[:8]}"
        self.store = PostgresStore(settings.database, shard_count=settings.shard_count,
                                   max_pool_size=4)
        s = settings
        self.dispatch = _open_redis(settings)
        self.redis: SchedulerDispatch | None = None
        if self.dispatch is not None:
            from tickwork.scheduler.dispatch import SchedulerDispatch  # noqa: PLC0415

            self.redis = SchedulerDispatch(store=self.store, dispatch=self.dispatch,
                                           clock=self.clock)
        # Shard leases are short and renewed every third of their length, apart from the
        # run leases (sized for jobs): a killed scheduler's shards move within seconds.
        self.leaser = ShardLeaser(store=self.store, clock=self.clock, owner=self.id,
                                  lease_seconds=s.shard_lease_seconds)
        self.planner = CountingPlanner(
            self.metrics, store=self.store, clock=self.clock,
            horizon_seconds=s.planner_horizon_seconds,
            interval_seconds=s.planner_interval_seconds, shards=self.leaser.shards,
            after_commit=self.redis.after_plan if self.redis else None)
        # Never sole_worker here: other processes' leases are only orphans once they expire.
        self.rescuer = Rescuer(store=self.store, clock=self.clock,
                               interval_seconds=s.rescue_interval_seconds,
                               on_rescued=lambda rescued: self.metrics.rescued(len(rescued)),
                               after_rescue=self.redis.after_rescue() if self.redis else None)
        if self.redis is not None:
            self.redis.promoter.on_promoted = self.metrics.promoted_moved
            self.redis.reconciler.on_reconciled = self._reconciled
        self.pruner = Pruner(store=self.store, clock=self.clock,
                             retention_days=s.retention_days)
        # A scheduler stopping gives its shards back and says so: take them now, not at the
        # next lease pass, so they are never left unplanned for seconds.
        self.listener = NotifyListener(s.database, lambda _: self.leaser.wake(),
                                       clock=self.clock, channel=SHARDS_CHANNEL)
        self._started = False

    async def start(self) -> None:
        await self.store.migrate()
        now = self.clock.now()
        await self.pruner.run_once(now)  # today's partitions exist before anything runs
        await self.leaser.run_once(now)
        self._started = True
        if self.dispatch is not None:
            await self.dispatch.check_settings()
        for loop in (self.leaser, self.planner, self.rescuer, self.pruner, *self._redis_loops()):
            loop.start()
        self.listener.start()
        await self._serve_metrics()
        log.info("tickwork scheduler is running: database %s, scheduler %s, %d of %d shards%s",
                 safe_url(self.settings.database), self.id, len(self.leaser.held),
                 await self.store.shard_count(), ", dispatch redis" if self.redis else "")

    def _redis_loops(self) -> tuple[Loop, ...]:
        return self.redis.loops() if self.redis is not None else ()

    def _reconciled(self, done: Reconciled) -> None:
        self.metrics.repaired(done.added)

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
        return await self._health(self.store, await self._mode(), id=self.id,
                                  shards=len(self.leaser.held))

    async def metrics_text(self) -> str:
        extra = [Family("tickwork_shard_leases_held", "gauge",
                        "Job shards this scheduler holds a lease on (it plans their jobs).",
                        [("", len(self.leaser.held))])]
        if self.redis is not None:
            extra += [mode_family(await self._mode(), (REDIS, DEGRADED)),
                      Family("tickwork_due_add_failed_total", "counter",
                             "Occurrences whose due_add to Redis failed (the reconciler "
                             "re-adds them).", [("", self.redis.feeder.failed)])]
        return self.metrics.render_process(SCHEDULER, extra)

    async def stop(self) -> None:
        log.info("stopping scheduler %s", self.id)
        await self._stop_metrics()
        await self.listener.stop()
        for loop in (self.planner, self.rescuer, self.pruner, *self._redis_loops()):
            await loop.stop()
        if self._started:
            await self.leaser.stop()  # gives the shards back at once
        if self.dispatch is not None:
            await self.dispatch.close()
        await self.store.close()
        log.info("stopped")


class WorkerProcess(_Process):
    kind = "worker"

    def __init__(self, settings: Settings, *, clock: Clock | None = None) -> None:
        super().__init__(settings, clock)
        s = settings
        # server_clock: a worker whose own clock runs fast still never starts a job early.
        self.store = PostgresStore(s.database, server_clock=True,
                                   max_pool_size=min(20, 4 + 2 * len(s.queues)))
        self.executors: dict[str, Executor] = {}
        self.pool: WorkerPool | None = None
        self.dispatch = _open_redis(settings)
        self.source: RedisClaimSource | None = None
        self.listener: NotifyListener | None = None
        self.secrets: SecretResolver | None = None
        self.metrics.dispatch = DispatchMode(POSTGRES if self.dispatch is None else REDIS)

    async def start(self) -> None:
        s = self.settings
        await self.store.migrate()
        self.secrets = secret_resolver_for(s.database)
        self.executors = build_executors(s.executors, self.secrets)
        worker_id = s.worker_id or f"worker-{uuid.uuid4().hex[:8]}"
        if self.dispatch is not None:
            from tickwork.worker.redis_source import RedisClaimSource  # noqa: PLC0415

            await self.dispatch.check_settings()
            self.source = RedisClaimSource(
                store=self.store, dispatch=self.dispatch, clock=self.clock, worker_id=worker_id,
                lease_seconds=s.lease_seconds, heartbeat_seconds=s.heartbeat_seconds,
                poll_interval_seconds=s.poll_interval_seconds, max_deliveries=s.max_deliveries,
                on_mode=self.metrics.dispatch.changed if self.metrics.dispatch else None)
        self.pool = WorkerPool(
            store=self.store, clock=self.clock, executors=self.executors, queues=s.queues,
            worker_id=worker_id, lease_seconds=s.lease_seconds,
            heartbeat_seconds=s.heartbeat_seconds, poll_interval_seconds=s.poll_interval_seconds,
            shutdown_grace_seconds=s.shutdown_grace_seconds, on_finished=self._finished)
        # Counting wraps the source the pool would use anyway: the Redis one, or its own SQL.
        self.pool.source = CountingSource(self.source or self.pool.source, self.metrics)
        self.listener = NotifyListener(s.database, self.pool.wake, clock=self.clock)
        self.listener.start()
        self.pool.start()
        await self._serve_metrics()
        log.info("tickwork worker is running: database %s, queues %s, worker %s%s",
                 safe_url(self.settings.database), ", ".join(f"{q}:{c}" for q, c in s.queues),
                 self.pool.worker_id, ", dispatch redis" if self.source else "")

    @property
    def mode(self) -> str:
        """``redis``, ``degraded`` (Redis unreachable: claiming from the store) or ``postgres``."""
        return self.source.mode if self.source is not None else POSTGRES

    def _finished(self, claim: Claim, result: Result, started: datetime,
                  finished: datetime) -> None:
        self.metrics.attempt_finished(claim, result, started, finished)
        log_run(claim, result, started, finished)

    async def health(self) -> dict[str, Any]:
        pool = self.pool
        return await self._health(self.store, self.mode,
                                  id=pool.worker_id if pool else None,
                                  running=pool.running_count if pool else 0)

    async def metrics_text(self) -> str:
        s = self.settings
        extra = [Family("tickwork_worker_running", "gauge", "Attempts running in this worker.",
                        [("", self.pool.running_count if self.pool else 0)]),
                 Family("tickwork_worker_concurrency", "gauge",
                        "Attempts this worker runs at most at once, by queue.",
                        [(f'queue="{q}"', c) for q, c in s.queues])]
        if self.source is not None:
            extra += [Family("tickwork_redis_reclaimed_total", "counter",
                             "Stream entries taken over from a consumer that died or hung.",
                             [("", self.source.reclaimed)]),
                      Family("tickwork_redis_dead_lettered_total", "counter",
                             "Stream entries moved to the dead stream (delivered more than "
                             "max_deliveries times, or not an occurrence key).",
                             [("", self.source.dead_lettered)])]
        return self.metrics.render_process(WORKER, extra)

    async def stop(self) -> None:
        log.info("stopping: no new runs; waiting up to %gs for running ones",
                 self.settings.shutdown_grace_seconds)
        await self._stop_metrics()
        if self.listener is not None:
            await self.listener.stop()
        if self.pool is not None:
            await self.pool.stop()
        for executor in self.executors.values():
            await executor.close()
        if self.secrets is not None:
            await self.secrets.store.close()
        if self.dispatch is not None:
            await self.dispatch.close()
        await self.store.close()
        log.info("stopped")
