"""The embedded service: planner, rescuer, worker pool and API in one process on one store.

``tickwork run`` starts this. On SQLite it holds ``<database>.lock`` for its lifetime, so it
knows it is the file's only service: attempts left running by a crashed predecessor are
orphans and are rescued at once instead of after their lease.

With ``redis`` set (``tickwork run --redis URL``) claims go through Redis as in the
postgres + redis deployment, all in this process: the planner adds what it plans to the due
set, the promoter moves due keys to the streams, the reconciler repairs Redis from the store,
and the worker pool claims what Redis delivers, falling back to the store while Redis is
unreachable (degraded mode). It works on SQLite too (the store's claim by keys is the same
code on both drivers), though Redis is for many workers on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tickwork import registry
from tickwork.client import AsyncClient
from tickwork.client.declared import sync_declared
from tickwork.clock import Clock
from tickwork.config import Settings
from tickwork.drivers import open_driver, safe_url
from tickwork.executors.admission import JobPolicy
from tickwork.metrics import REDIS, DispatchMode
from tickwork.runtime import assemble
from tickwork.runtime.base import Process, Stoppable
from tickwork.runtime.client import read_client_for
from tickwork.runtime.consume import start_sources
from tickwork.runtime.eventloop import loop_name
from tickwork.runtime.lock import FileLock
from tickwork.scheduler.alert_delivery import AlertDeliverer
from tickwork.scheduler.alerts import AlertEvaluator
from tickwork.scheduler.loop import Loop
from tickwork.scheduler.planner import Planner
from tickwork.scheduler.pruner import Pruner
from tickwork.scheduler.rescuer import Rescuer
from tickwork.scheduler.vacuumer import Vacuumer

if TYPE_CHECKING:
    from tickwork.scheduler.dispatch import SchedulerDispatch
    from tickwork.streams import StreamSource
    from tickwork.worker.redis_source import RedisClaimSource

log = logging.getLogger("tickwork.service")


class EmbeddedService(Process):
    kind = "service"

    def __init__(self, settings: Settings, *, clock: Clock | None = None,
                 imports: tuple[str, ...] = (), jobs: Sequence[Mapping[str, Any]] = ()
                 ) -> None:
        """``imports``: modules whose ``@tickwork.job`` functions become jobs; ``jobs``: more
        job documents to create or update at start (``tickwork run --demo``'s). The modules
        of all of them are allowed to run."""
        super().__init__(settings, open_driver(settings.database), clock)
        self.imports = imports
        self.declared = [dict(doc) for doc in jobs]
        self.executor_settings = settings.executors
        self.metrics.dispatch = DispatchMode(REDIS if settings.redis else self.driver.name)
        self.lock = FileLock.for_database(settings.database, self.driver)
        self.client: AsyncClient | None = None  # made at start, with what it must know
        self.reader: AsyncClient | None = None  # read_database's, for the API's lists and stats
        self.planner: Planner | None = None
        self.rescuer: Rescuer | None = None
        self.alerts: tuple[AlertEvaluator, AlertDeliverer] | None = None
        self.pruner: Pruner | None = None
        self.vacuumer: Vacuumer | None = None
        self.redis: SchedulerDispatch | None = None  # the due set's side: promoter, reconciler
        self.source: RedisClaimSource | None = None  # the worker's side: claims from Redis
        self.streams: list[StreamSource] = []  # job commands consumed (the consume setting)
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        self.lock.take()
        await self.driver.migrate()
        jobs = [*self._import_job_modules(), *self.declared]
        # The modules of declared jobs are allowed, and no others beyond the settings'.
        executor_settings = self.settings.executors
        allowed = {*executor_settings.python_allowed_modules, *self._job_modules(jobs)}
        self.executor_settings = replace(executor_settings,
                                         python_allowed_modules=tuple(sorted(allowed)))
        self.executors, self.secrets = assemble.executors(self.executor_settings, self.driver)

        s = self.settings
        worker = assemble.worker_id(s)
        await self._start_redis(worker)
        self.client = AsyncClient(
            self.store, clock=self.clock, on_change=self._wake, on_cancel=self._beat,
            policy=JobPolicy(self.executor_settings, runs_jobs=True),
            after_insert=self.redis.feeder.add_waiting if self.redis else None)
        self.pool = assemble.worker_pool(s, store=self.store, clock=self.clock,
                                         executors=self.executors, worker=worker,
                                         metrics=self.metrics, source=self.source,
                                         on_ended=self._run_ended)
        self.planner = assemble.planner(s, store=self.store, clock=self.clock,
                                        metrics=self.metrics, redis=self.redis, wake=self._wake)
        self.rescuer = assemble.rescuer(
            s, store=self.store, clock=self.clock, metrics=self.metrics, redis=self.redis,
            wake=self._rescued, sole_worker=worker if self.lock.held else None)
        self.alerts = assemble.alert_loops(s, store=self.store, clock=self.clock,
                                           executors=self.executors)
        self.vacuumer = assemble.vacuumer(store=self.store, clock=self.clock)
        self.pruner = assemble.pruner(s, store=self.store, clock=self.clock,
                                      metrics=self.metrics, vacuumer=self.vacuumer)
        await self.rescuer.run_once(self.clock.now())  # orphans of a crashed predecessor
        await self._sync_jobs(jobs)
        for loop in (self.planner, self.rescuer, self.pruner, self.vacuumer, *self.alerts,
                     *self._redis_loops()):
            loop.start()
        self.pool.start()
        self.streams = await start_sources(self, self.client)
        log.info("tickwork is running: database %s, queues %s, worker %s%s, event loop %s",
                 safe_url(s.database), ", ".join(f"{q}:{c}" for q, c in s.queues),
                 self.pool.worker_id, ", dispatch redis" if self.redis else "", loop_name())
        if s.api_enabled:
            await self._start_api()

    async def _start_redis(self, worker: str) -> None:
        """Redis dispatch in this process: the scheduler's side and the worker's."""
        self.dispatch = assemble.open_dispatch(self.settings)
        if self.dispatch is None:
            return
        await self.dispatch.check_settings()
        self.redis = assemble.scheduler_dispatch(store=self.store, dispatch=self.dispatch,
                                                 clock=self.clock, metrics=self.metrics,
                                                 settings=self.settings)
        self.source = assemble.redis_claim_source(
            self.settings, store=self.store, dispatch=self.dispatch, clock=self.clock,
            worker=worker, metrics=self.metrics, on_lost=self.redis.reconciler.notify_lost)

    def _redis_loops(self) -> tuple[Loop, ...]:
        return self.redis.loops() if self.redis is not None else ()

    def loops(self) -> tuple[Stoppable, ...]:
        return (*self.streams,
                *(loop for loop in (self.planner, self.rescuer, self.pruner, self.vacuumer)
                  if loop is not None),
                *(self.alerts or ()), *self._redis_loops())

    @property
    def mode(self) -> str:
        """``redis``, ``degraded`` (Redis unreachable: claiming from the store), or the
        store's name (``sqlite``, ``postgres``) without Redis."""
        assert self.metrics.dispatch is not None
        return self.metrics.dispatch.mode

    async def stop(self) -> None:
        """Graceful: stop planning and claiming, let running attempts finish (G10)."""
        log.info("stopping: no new runs; waiting up to %gs for running ones",
                 self.settings.shutdown_grace_seconds)
        try:
            await super().stop()
        finally:
            self.lock.release()
            self._stopped.set()

    async def _stop_more(self) -> None:
        if self.reader is not None:
            await self.reader.close()
            self.reader = None

    # -- jobs declared in code or handed in --------------------------------------------------

    def _import_job_modules(self) -> list[dict[str, Any]]:
        for module in self.imports:
            importlib.import_module(module)
        return registry.registered()

    @staticmethod
    def _job_modules(jobs: list[dict[str, Any]]) -> set[str]:
        return {str(j["payload"]["callable"]).split(":", 1)[0] for j in jobs}

    async def _sync_jobs(self, docs: list[dict[str, Any]]) -> None:
        """Create declared jobs that do not exist; update those whose document changed."""
        assert self.client is not None
        synced = await sync_declared(self.client, docs)
        for name in synced.created:
            log.info("created job %s", name)
        for name in synced.updated:
            log.info("updated job %s to match its declaration", name)

    # -- helpers -----------------------------------------------------------------------------

    def _wake(self) -> None:
        if self.pool is not None:
            self.pool.wake()

    def _beat(self) -> None:
        if self.pool is not None:
            self.pool.heartbeat_soon()

    def _rescued(self) -> None:
        self._wake()
        self._run_ended()

    def _run_ended(self) -> None:
        """A run ended (or was rescued): judge its job's alerts now, not at the next pass."""
        if self.alerts is not None:
            self.alerts[0].wake()

    async def _start_api(self) -> None:
        from tickwork.api.app import create_app  # noqa: PLC0415  (FastAPI loads only to serve)
        from tickwork.api.deps import retention_of  # noqa: PLC0415
        from tickwork.api.server import ApiServer  # noqa: PLC0415

        s = self.settings
        assert self.client is not None
        self.reader = await read_client_for(s)
        app = create_app(self.client, open_access=s.open_access, allowed_hosts=[s.host],
                         metrics=self.metrics, access_log=s.access_log,
                         retention=retention_of(s), read_client=self.reader)
        self.http = ApiServer(app, host=s.host, port=s.port)
        await self.http.start()
        if s.open_access:
            why = " (--demo implies --open on loopback)" if s.demo else ""
            log.warning("dashboard: %s/dashboard/ -- OPEN ACCESS, no token needed%s",
                        self.http.url, why)
        else:
            log.info("dashboard: %s/dashboard/ (sign in with a token from "
                     "'tickwork tokens create')", self.http.url)

    @property
    def api(self) -> Any:
        """The API server while serving (``.url``), else None."""
        return self.http
