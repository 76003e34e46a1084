"""Builds the parts of a process from settings, a store, a dispatch and an observer.

Every kind of process (embedded, scheduler, worker) gets its worker pool, claim source,
planner, rescuer and Redis side from here, so a new deployment is a new combination of the
same parts. The observer is the process's ``Metrics``: each part is handed the hook it
reports through when it is made, never patched afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from tickwork.clock import Clock
from tickwork.config import Settings
from tickwork.document.alerts import parse_alert_defaults
from tickwork.drivers import Driver
from tickwork.drivers.base import Completion, Store
from tickwork.drivers.enqueue import JobsPurged
from tickwork.drivers.history import HistoryStore
from tickwork.executors import build_executors
from tickwork.executors.base import Executor, ExecutorSettings
from tickwork.metrics import Metrics
from tickwork.models import TERMINAL_STATES, Claim
from tickwork.runtime.tracing import attempt_tracer
from tickwork.scheduler.alert_delivery import AlertDeliverer
from tickwork.scheduler.alerts import AlertEvaluator
from tickwork.scheduler.planner import Planner
from tickwork.scheduler.pruner import Pruner
from tickwork.scheduler.rescuer import Rescuer
from tickwork.scheduler.vacuumer import Vacuumer
from tickwork.secrets import SecretResolver, resolver_for
from tickwork.worker.pool import WorkerPool
from tickwork.worker.runlog import RunLog
from tickwork.worker.sources import ClaimSource

if TYPE_CHECKING:
    from tickwork.drivers.redis.dispatch import RedisDispatch
    from tickwork.scheduler.dispatch import SchedulerDispatch
    from tickwork.worker.redis_source import RedisClaimSource


def executors(settings: ExecutorSettings, driver: Driver
              ) -> tuple[dict[str, Executor], SecretResolver | None]:
    """One executor per kind, resolving secrets from the driver's secret store (none where
    there is none, as for an in-memory SQLite database)."""
    secrets = resolver_for(driver)
    return build_executors(settings, secrets), secrets


def open_dispatch(settings: Settings) -> RedisDispatch | None:
    """The Redis dispatch of ``settings.redis``, or None without Redis."""
    if settings.redis is None:
        return None
    from tickwork.drivers.redis.dispatch import RedisDispatch  # noqa: PLC0415  (the redis extra)

    return RedisDispatch.from_url(settings.redis)


def worker_id(settings: Settings) -> str:
    return settings.worker_id or f"worker-{uuid.uuid4().hex[:8]}"


def redis_claim_source(settings: Settings, *, store: Store, dispatch: RedisDispatch,
                       clock: Clock, worker: str, metrics: Metrics,
                       on_lost: Callable[[str], None] | None = None) -> RedisClaimSource:
    """A worker's claims from what Redis delivers, from the store while Redis is down."""
    from tickwork.worker.redis_source import RedisClaimSource  # noqa: PLC0415  (the redis extra)

    s = settings
    return RedisClaimSource(
        store=store, dispatch=dispatch, clock=clock, worker_id=worker,
        lease_seconds=s.lease_seconds, heartbeat_seconds=s.heartbeat_seconds,
        poll_interval_seconds=s.poll_interval_seconds, max_deliveries=s.max_deliveries,
        on_lost=on_lost, on_mode=metrics.dispatch.changed if metrics.dispatch else None,
        priorities=queue_priorities(s))


def queue_priorities(settings: Settings) -> dict[str, int]:
    """Each queue the worker serves and its priority (``queue_priorities``; unnamed: 0)."""
    given = dict(settings.queue_priorities)
    return {name: given.get(name, 0) for name, _ in settings.queues}


def worker_pool(settings: Settings, *, store: Store, clock: Clock,
                executors: dict[str, Executor], worker: str, metrics: Metrics,
                source: ClaimSource | None = None,
                on_ended: Callable[[], None] | None = None) -> WorkerPool:
    """The pool that claims, runs and completes attempts of ``settings.queues``;
    ``on_ended`` is called when a run ends (succeeded, or out of attempts)."""
    s = settings
    on_finished = metrics.attempt_finished
    if on_ended is not None:
        def on_finished(claim: Claim, result: object, completion: Completion) -> None:
            metrics.attempt_finished(claim, result, completion)
            if completion.state in TERMINAL_STATES:
                on_ended()

    return WorkerPool(
        store=store, clock=clock, executors=executors, queues=s.queues, worker_id=worker,
        lease_seconds=s.lease_seconds, heartbeat_seconds=s.heartbeat_seconds,
        poll_interval_seconds=s.poll_interval_seconds,
        shutdown_grace_seconds=s.shutdown_grace_seconds, on_finished=on_finished,
        run_log=RunLog(each=s.log_each_run), tracer=attempt_tracer(s),
        on_claimed=metrics.claimed, source=source)


def scheduler_dispatch(*, store: Store, dispatch: RedisDispatch, clock: Clock,
                       metrics: Metrics, settings: Settings | None = None) -> SchedulerDispatch:
    """A scheduler's Redis side: promoter, reconciler, queue catalogue and feeder; the
    reconciler re-adds ``settings.queue_priorities``' higher queues first."""
    from tickwork.scheduler.dispatch import SchedulerDispatch  # noqa: PLC0415  (the redis extra)

    return SchedulerDispatch(store=store, dispatch=dispatch, clock=clock,
                             on_promoted=metrics.promoted_moved,
                             on_backlog=metrics.promoter_backlog,
                             on_reconciled=lambda done: metrics.repaired(done.added),
                             priorities=dict(settings.queue_priorities) if settings else None)


def planner(settings: Settings, *, store: Store, clock: Clock, metrics: Metrics,
            redis: SchedulerDispatch | None, wake: Callable[[], None] | None = None,
            **options: Any) -> Planner:
    """The planner, counting what it inserts and waking ``wake`` (local workers) then."""

    def planned(inserted: int, _earliest: datetime) -> None:
        metrics.planned_inserted(inserted)
        if wake is not None:
            wake()

    return Planner(store=store, clock=clock, horizon_seconds=settings.planner_horizon_seconds,
                   one_off_horizon_seconds=settings.planner_one_off_horizon_seconds,
                   interval_seconds=settings.planner_interval_seconds, on_planned=planned,
                   burst_threshold=settings.planner_burst_threshold,
                   lanes=settings.planner_lanes,
                   after_commit=redis.after_plan if redis else None, **options)


def rescuer(settings: Settings, *, store: Store, clock: Clock, metrics: Metrics,
            redis: SchedulerDispatch | None, wake: Callable[[], None] | None = None,
            sole_worker: str | None = None) -> Rescuer:
    """The rescuer of expired leases, counting what it rescues and waking ``wake`` then.
    ``sole_worker``: the only worker on the store (an embedded service's lock says so), whose
    attempts left running by a crashed predecessor are orphans at once."""

    def rescued(done: list[Any]) -> None:
        metrics.rescued(len(done))
        if wake is not None:
            wake()

    return Rescuer(store=store, clock=clock, interval_seconds=settings.rescue_interval_seconds,
                   sole_worker=sole_worker, on_rescued=rescued,
                   after_rescue=redis.after_rescue() if redis else None,
                   after_chained=redis.after_chained if redis else None)


def alert_loops(settings: Settings, *, store: Store, clock: Clock,
                executors: dict[str, Executor],
                shards: Callable[[], frozenset[int]] | None = None,
                ) -> tuple[AlertEvaluator, AlertDeliverer]:
    """The alert evaluator (of ``shards``' jobs, or all) and the loop that delivers what it
    fires through ``executors``; the evaluator wakes the deliverer when it fired."""
    deliverer = AlertDeliverer(store=store, clock=clock, executors=executors)
    evaluator = AlertEvaluator(
        store=store, clock=clock, interval_seconds=settings.alert_interval_seconds,
        defaults=parse_alert_defaults(settings.alert_defaults), shards=shards,
        on_changed=deliverer.wake)
    return evaluator, deliverer


def pruner(settings: Settings, *, store: Store, clock: Clock,
           metrics: Metrics | None = None, vacuumer: Vacuumer | None = None) -> Pruner:
    """History and audit retention (both drivers' stores keep the history seam), and the
    purge of finished one-off and deleted jobs past ``finished_job_retention_seconds``,
    counted in ``metrics``; a pass that deleted rows wakes ``vacuumer``."""

    def purged(done: JobsPurged) -> None:
        assert metrics is not None
        metrics.jobs_purged("finished", done.finished)
        metrics.jobs_purged("deleted", done.deleted)

    return Pruner(store=cast(HistoryStore, store), clock=clock,
                  retention_days=settings.retention_days,
                  audit_retention_days=settings.audit_retention_days, jobs=store,
                  finished_job_retention_seconds=settings.finished_job_retention_seconds,
                  interval_seconds=settings.prune_interval_seconds,
                  on_purged=None if metrics is None else purged,
                  on_deleted=None if vacuumer is None else vacuumer.wake)


def vacuumer(*, store: Store, clock: Clock) -> Vacuumer:
    """Vacuums and analyzes the store's tables where the server does not (autovacuum off)."""
    return Vacuumer(store=cast(HistoryStore, store), clock=clock)
