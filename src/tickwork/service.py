"""The embedded service: planner, rescuer and worker pool in one process on one store.

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
import contextlib
import fcntl
import importlib
import logging
import os
import signal
import uuid
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tickwork import registry
from tickwork.client import AsyncClient
from tickwork.clock import Clock, SystemClock
from tickwork.config import Settings
from tickwork.demo import DEMO_JOBS
from tickwork.document import parse_job_document
from tickwork.drivers import open_driver, safe_url
from tickwork.drivers.sqlite.connection import path_from_url
from tickwork.errors import JobNotFound, StoreUnavailable
from tickwork.executors import build_executors
from tickwork.executors.admission import JobPolicy
from tickwork.executors.base import Executor
from tickwork.metrics import REDIS, CountingPlanner, CountingSource, DispatchMode, Metrics
from tickwork.models import Claim
from tickwork.scheduler.loop import Loop
from tickwork.scheduler.planner import Planner
from tickwork.scheduler.rescuer import Rescuer
from tickwork.secrets import SecretResolver
from tickwork.secrets import resolver_for as secret_resolver_for
from tickwork.worker.outcomes import Result
from tickwork.worker.pool import WorkerPool
from tickwork.worker.runlog import log_run
from tickwork.worker.sources import ClaimSource

if TYPE_CHECKING:
    from tickwork.drivers.redis.dispatch import RedisDispatch
    from tickwork.scheduler.dispatch import SchedulerDispatch
    from tickwork.worker.redis_source import RedisClaimSource

log = logging.getLogger("tickwork.service")


class Service:
    def __init__(self, settings: Settings, *, clock: Clock | None = None,
                 imports: tuple[str, ...] = ()) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.imports = imports
        self.driver = open_driver(settings.database)
        self.store = self.driver.store
        self.executors: dict[str, Executor] = {}
        self.executor_settings = settings.executors
        self.secrets: SecretResolver | None = None
        self.pool: WorkerPool | None = None
        self.planner: Planner | None = None
        self.rescuer: Rescuer | None = None
        self.client = AsyncClient(self.store, clock=self.clock, on_change=self._wake)
        self._lock: IO[str] | None = None
        self.metrics = Metrics()
        self.metrics.dispatch = DispatchMode(REDIS if settings.redis else self.driver.name)
        self.dispatch: RedisDispatch | None = None
        self.redis: SchedulerDispatch | None = None  # the due set's side: promoter, reconciler
        self.source: RedisClaimSource | None = None  # the worker's side: claims from Redis
        self.api: Any = None  # tickwork.api.server.ApiServer while serving
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        self._take_lock()
        await self.store.migrate()
        jobs = self._import_job_modules()
        executor_settings = self.settings.executors
        # Modules of declared jobs are allowed; the demo's only under --demo.
        allowed = {*executor_settings.python_allowed_modules, *self._job_modules(jobs),
                   *(["tickwork.demo"] if self.settings.demo else [])}
        self.executor_settings = replace(executor_settings,
                                         python_allowed_modules=tuple(sorted(allowed)))
        self.client.policy = JobPolicy(self.executor_settings, runs_jobs=True)
        self.secrets = secret_resolver_for(self.settings.database)
        self.executors = build_executors(self.executor_settings, self.secrets)

        s = self.settings
        worker_id = s.worker_id or f"worker-{uuid.uuid4().hex[:8]}"
        source = await self._start_redis(worker_id) if s.redis else None
        self.pool = WorkerPool(
            store=self.store, clock=self.clock, executors=self.executors, queues=s.queues,
            worker_id=worker_id, lease_seconds=s.lease_seconds,
            heartbeat_seconds=s.heartbeat_seconds, poll_interval_seconds=s.poll_interval_seconds,
            shutdown_grace_seconds=s.shutdown_grace_seconds, on_finished=self._log_run,
            source=source)
        self.pool.source = CountingSource(self.pool.source, self.metrics)
        self.planner = CountingPlanner(
            self.metrics, store=self.store, clock=self.clock,
            horizon_seconds=s.planner_horizon_seconds,
            interval_seconds=s.planner_interval_seconds, on_planned=lambda _: self._wake(),
            after_commit=self.redis.after_plan if self.redis else None)
        sole = self.pool.worker_id if self._lock is not None else None
        self.rescuer = Rescuer(store=self.store, clock=self.clock,
                               interval_seconds=s.rescue_interval_seconds, sole_worker=sole,
                               on_rescued=self._on_rescued,
                               after_rescue=self.redis.after_rescue() if self.redis else None)
        await self.rescuer.run_once(self.clock.now())  # orphans of a crashed predecessor
        await self._sync_jobs([*jobs, *(DEMO_JOBS if s.demo else [])])
        self.planner.start()
        self.rescuer.start()
        for loop in self._redis_loops():
            loop.start()
        self.pool.start()
        log.info("tickwork is running: database %s, queues %s, worker %s%s", safe_url(s.database),
                 ", ".join(f"{q}:{c}" for q, c in s.queues), self.pool.worker_id,
                 ", dispatch redis" if self.redis else "")
        if s.api_enabled:
            await self._start_api()

    async def _start_redis(self, worker_id: str) -> ClaimSource:
        """Redis dispatch in this process: the scheduler's side and the worker's."""
        from tickwork.drivers.redis.dispatch import RedisDispatch  # noqa: PLC0415
        from tickwork.scheduler.dispatch import SchedulerDispatch  # noqa: PLC0415
        from tickwork.worker.redis_source import RedisClaimSource  # noqa: PLC0415

        s = self.settings
        assert s.redis is not None
        assert self.metrics.dispatch is not None
        self.dispatch = RedisDispatch.from_url(s.redis)
        await self.dispatch.check_settings()
        self.redis = SchedulerDispatch(store=self.store, dispatch=self.dispatch,
                                       clock=self.clock)
        self.redis.promoter.on_promoted = self.metrics.promoted_moved
        self.redis.reconciler.on_reconciled = lambda done: self.metrics.repaired(done.added)
        self.client.after_insert = self.redis.feeder.add_waiting  # triggers, backfills
        self.source = RedisClaimSource(
            store=self.store, dispatch=self.dispatch, clock=self.clock, worker_id=worker_id,
            lease_seconds=s.lease_seconds, heartbeat_seconds=s.heartbeat_seconds,
            poll_interval_seconds=s.poll_interval_seconds, max_deliveries=s.max_deliveries,
            on_lost=self.redis.reconciler.notify_lost, on_mode=self.metrics.dispatch.changed)
        return self.source

    def _redis_loops(self) -> tuple[Loop, ...]:
        return self.redis.loops() if self.redis is not None else ()

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
        if self.api is not None:
            await self.api.stop()
            self.api = None
        if self.planner is not None:
            await self.planner.stop()
        if self.rescuer is not None:
            await self.rescuer.stop()
        for loop in self._redis_loops():
            await loop.stop()
        if self.pool is not None:
            await self.pool.stop()
        for executor in self.executors.values():
            await executor.close()
        if self.secrets is not None:
            await self.secrets.store.close()
        if self.dispatch is not None:
            await self.dispatch.close()
        await self.store.close()
        self._release_lock()
        self._stopped.set()
        log.info("stopped")

    async def run_until_signalled(self) -> None:
        """Start, run until SIGTERM or SIGINT, then stop gracefully."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        try:
            await stop.wait()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            await self.stop()

    # -- jobs declared in code and the demo --------------------------------------------------

    def _import_job_modules(self) -> list[dict[str, Any]]:
        for module in self.imports:
            importlib.import_module(module)
        return registry.registered()

    @staticmethod
    def _job_modules(jobs: list[dict[str, Any]]) -> set[str]:
        return {str(j["payload"]["callable"]).split(":", 1)[0] for j in jobs}

    async def _sync_jobs(self, docs: list[dict[str, Any]]) -> None:
        """Create declared jobs that do not exist; update those whose document changed."""
        for doc in docs:
            spec = parse_job_document(doc).spec
            try:
                current = await self.client.get_job(spec.name)
            except JobNotFound:
                await self.client.create_job(spec)
                log.info("created job %s", spec.name)
                continue
            if current.spec != spec:
                await self.client.update_job(current.id, doc)
                log.info("updated job %s to match its declaration", spec.name)

    # -- helpers -----------------------------------------------------------------------------

    def _wake(self) -> None:
        if self.pool is not None:
            self.pool.wake()

    async def _start_api(self) -> None:
        from tickwork.api.app import create_app  # noqa: PLC0415  (FastAPI loads only to serve)
        from tickwork.api.server import ApiServer  # noqa: PLC0415

        s = self.settings
        app = create_app(self.client, open_access=s.open_access, allowed_hosts=[s.host],
                         metrics=self.metrics)
        self.api = ApiServer(app, host=s.host, port=s.port)
        await self.api.start()
        if s.open_access:
            why = " (--demo implies --open on loopback)" if s.demo else ""
            log.warning("dashboard: %s/dashboard/ -- OPEN ACCESS, no token needed%s",
                        self.api.url, why)
        else:
            log.info("dashboard: %s/dashboard/ (sign in with a token from "
                     "'tickwork tokens create')", self.api.url)

    def _on_rescued(self, rescued: list[Any]) -> None:
        self.metrics.rescued(len(rescued))
        self._wake()

    def _log_run(self, claim: Claim, result: Result, started: datetime,
                 finished: datetime) -> None:
        self.metrics.attempt_finished(claim, result, started, finished)
        log_run(claim, result, started, finished)

    def _take_lock(self) -> None:
        if self.driver.shared:  # many processes share it: no file to lock
            return
        path = path_from_url(self.settings.database)
        if path == ":memory:":
            return
        lock_path = Path(f"{path}.lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = lock_path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise StoreUnavailable(
                f"another tickwork service is already running on {path} "
                f"(it holds {lock_path}); stop it first, or use another --database") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._lock = handle

    def _release_lock(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None
