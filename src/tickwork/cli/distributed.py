"""``tickwork scheduler`` and ``tickwork worker``: the postgres deployment's processes."""

from __future__ import annotations

import click

from tickwork.cli.common import settings_from, working_directory_on_path
from tickwork.cli.options import Target, examples, logging_options, setting, store_options
from tickwork.cli.service import QUEUES, WORKER_ID
from tickwork.config import Settings

REDIS = ("redis://host:port/db, redis+cluster://host:port,host:port/ or "
         "redis+sentinel://host:port,host:port/MASTER/db: dispatch through Redis (the "
         "postgres + redis deployment)")
METRICS = setting("--metrics-address", metavar="HOST:PORT", env="TICKWORK_METRICS_ADDRESS",
                  help="serve this process's /metrics and /healthz here, e.g. 127.0.0.1:9100 "
                  "(port 0 picks one)")


def load_extras(settings: Settings, command: str) -> None:
    from tickwork.runtime.client import load_extra  # noqa: PLC0415  (the processes load to run)

    load_extra("tickwork.drivers.postgres", "database", f"tickwork {command}")
    if settings.redis:
        load_extra("tickwork.drivers.redis.dispatch", "redis", "dispatching through Redis")


@click.command("scheduler", epilog=examples(
    "tickwork scheduler --database postgresql://tickwork@db.internal/tickwork",
    "tickwork scheduler --redis redis://cache.internal:6379/0 --metrics-address 0.0.0.0:9100"))
@click.option("--scheduler-id", metavar="NAME",
              help="name this scheduler in shard leases and logs")
@setting("--shard-lease-seconds", metavar="SECONDS", env="TICKWORK_SHARD_LEASE_SECONDS",
         help="how long its shard leases last (renewed every third of it): a killed "
         "scheduler's shards move after about this long; default 5, at least 1")
@METRICS
@logging_options
@store_options(redis=REDIS)
async def scheduler(target: Target, scheduler_id: str | None, shard_lease_seconds: str | None,
                    metrics_address: str | None) -> int:
    """Plan jobs, rescue leases, prune history (PostgreSQL).

    Run as many as you like: each plans the shards it leases, and a crashed one's shards
    are taken over when its lease expires.
    """
    settings = settings_from(target, metrics_address=metrics_address,
                             shard_lease_seconds=shard_lease_seconds)
    load_extras(settings, "scheduler")
    from tickwork.runtime.scheduler import SchedulerProcess  # noqa: PLC0415  (the postgres extra)

    await SchedulerProcess(settings, scheduler_id=scheduler_id).run_until_signalled()
    return 0


@click.command("worker", epilog=examples(
    "tickwork worker --database postgresql://tickwork@db.internal/tickwork",
    "tickwork worker --queues default:16,mail:4 --worker-id web-1"))
@QUEUES
@WORKER_ID
@METRICS
@logging_options
@store_options(redis=REDIS)
async def worker(target: Target, queues: str | None, worker_id: str | None,
                 metrics_address: str | None) -> int:
    """Claim and run due jobs of some queues (PostgreSQL).

    Run as many as you like. Python jobs' modules import from the working directory first.
    """
    settings = settings_from(target, queues=queues, worker_id=worker_id,
                             metrics_address=metrics_address)
    load_extras(settings, "worker")
    from tickwork.runtime.worker import WorkerProcess  # noqa: PLC0415  (the postgres extra)

    working_directory_on_path()  # python jobs' modules in the project folder import
    process = WorkerProcess(settings)
    await process.run_until_signalled()
    process.exit_now_if_threads_abandoned()
    return 0
