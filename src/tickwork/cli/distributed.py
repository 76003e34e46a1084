"""``tickwork scheduler`` and ``tickwork worker``: the postgres deployment's processes."""

from __future__ import annotations

import argparse
import logging

from tickwork.cli.common import add_store_options, settings_from, working_directory_on_path
from tickwork.config import Settings
from tickwork.runtime.client import load_extra

log = logging.getLogger("tickwork.cli")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    scheduler = commands.add_parser(
        "scheduler", help="plan jobs, rescue expired leases and prune history (PostgreSQL); "
        "run as many as you like")
    add_store_options(scheduler)
    _add_redis_option(scheduler)
    scheduler.add_argument("--scheduler-id", metavar="NAME",
                           help="name this scheduler in shard leases and logs")
    scheduler.add_argument("--shard-lease-seconds", metavar="SECONDS",
                           help="how long its shard leases last (renewed every third of it): "
                           "a killed scheduler's shards move after about this long; default "
                           "5, at least 1; env TICKWORK_SHARD_LEASE_SECONDS")
    add_metrics_option(scheduler)
    scheduler.add_argument("--log-level", default=None,
                           help="debug, info (default), warning, error")
    scheduler.set_defaults(handler=run_scheduler)

    worker = commands.add_parser(
        "worker", help="claim and run due jobs of some queues (PostgreSQL); "
        "run as many as you like")
    add_store_options(worker)
    worker.add_argument("--queues", metavar="SPEC", help="queues and their concurrency, "
                        "e.g. default:16,mail:4")
    worker.add_argument("--worker-id", metavar="NAME", help="name this worker in run history")
    _add_redis_option(worker)
    add_metrics_option(worker)
    worker.add_argument("--log-level", default=None, help="debug, info (default), warning, error")
    worker.set_defaults(handler=run_worker)


def _add_redis_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis", metavar="URL", help="redis://host:port/db: dispatch through "
                        "Redis (the postgres + redis deployment); env TICKWORK_REDIS_URL")


def add_metrics_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metrics-address", metavar="HOST:PORT",
                        help="serve this process's /metrics and /healthz here, e.g. "
                        "127.0.0.1:9100 (port 0 picks one); env TICKWORK_METRICS_ADDRESS")


def load_extras(settings: Settings, command: str) -> None:
    load_extra("tickwork.drivers.postgres", "database", f"tickwork {command}")
    if settings.redis:
        load_extra("tickwork.drivers.redis.dispatch", "redis", "dispatching through Redis")


async def run_scheduler(args: argparse.Namespace) -> int:
    settings = settings_from(args, redis=args.redis, metrics_address=args.metrics_address,
                             shard_lease_seconds=args.shard_lease_seconds)
    load_extras(settings, "scheduler")
    from tickwork.runtime.scheduler import SchedulerProcess  # noqa: PLC0415  (the postgres extra)

    if args.log_level is None:
        logging.getLogger().setLevel(logging.INFO)
    await SchedulerProcess(settings, scheduler_id=args.scheduler_id).run_until_signalled()
    return 0


async def run_worker(args: argparse.Namespace) -> int:
    settings = settings_from(args, queues=args.queues, worker_id=args.worker_id,
                             redis=args.redis, metrics_address=args.metrics_address)
    load_extras(settings, "worker")
    from tickwork.runtime.worker import WorkerProcess  # noqa: PLC0415  (the postgres extra)

    if args.log_level is None:
        logging.getLogger().setLevel(logging.INFO)
    working_directory_on_path()  # python jobs' modules in the project folder import
    worker = WorkerProcess(settings)
    await worker.run_until_signalled()
    worker.exit_now_if_threads_abandoned()
    return 0
