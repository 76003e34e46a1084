"""``tickwork run`` (the embedded service) and ``tickwork migrate``."""

from __future__ import annotations

import argparse
import logging

from tickwork.cli.api import add_serve_options
from tickwork.cli.common import add_store_options, import_modules, settings_from
from tickwork.cli.demo import DEMO_JOBS
from tickwork.drivers import open_driver
from tickwork.runtime.client import load_extra
from tickwork.runtime.embedded import EmbeddedService

log = logging.getLogger("tickwork.cli")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser(
        "run", help="run everything in one process: planner, workers, API and dashboard "
        "(SQLite by default)")
    add_store_options(run)
    run.add_argument("--queues", metavar="SPEC", help="queues and their concurrency, "
                     "e.g. default:16,mail:4")
    run.add_argument("--demo", action="store_true", default=None,
                     help="create a few demo jobs to watch run; implies --open on loopback")
    add_serve_options(run)
    run.add_argument("--no-api", dest="api_enabled", action="store_false", default=None,
                     help="do not serve the API and dashboard")
    run.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                     help="import MODULE so its @tickwork.job functions become jobs (repeatable)")
    run.add_argument("--worker-id", metavar="NAME", help="name this worker in run history")
    run.add_argument("--redis", metavar="URL", help="redis://host:port/db: dispatch through "
                     "Redis in this process (as the postgres + redis deployment does); "
                     "env TICKWORK_REDIS_URL")
    run.add_argument("--log-level", default=None, help="debug, info (default), warning, error")
    run.set_defaults(handler=run_service)

    migrate = commands.add_parser("migrate", help="create or upgrade the database schema")
    add_store_options(migrate)
    migrate.set_defaults(handler=run_migrate)


async def run_service(args: argparse.Namespace) -> int:
    if args.log_level is None:
        logging.getLogger().setLevel(logging.INFO)
    open_access = args.open_access
    if args.demo and open_access is None and args.host in (None, "127.0.0.1", "::1", "localhost"):
        open_access = True  # the README's first command shows the dashboard without a token
    settings = settings_from(args, queues=args.queues, demo=args.demo, worker_id=args.worker_id,
                             host=args.host, port=args.port, open_access=open_access,
                             api_enabled=args.api_enabled,
                             log_each_run=True if args.demo else None)
    if settings.redis:
        load_extra("tickwork.drivers.redis.dispatch", "redis", "dispatching through Redis")
    import_modules(args.imports)
    service = EmbeddedService(settings, imports=tuple(args.imports),
                              jobs=DEMO_JOBS if settings.demo else ())
    await service.run_until_signalled()
    service.exit_now_if_threads_abandoned()
    return 0


async def run_migrate(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    driver = open_driver(settings.database)
    try:
        await driver.migrate()
    finally:
        await driver.close()
    print(f"database {settings.database} is up to date")
    return 0
