"""``tickwork run`` (the embedded service) and ``tickwork migrate``."""

from __future__ import annotations

import click

from tickwork.cli.common import import_modules, settings_from
from tickwork.cli.options import Target, examples, logging_options, setting, store_options


def serve_options(command: click.decorators.FC) -> click.decorators.FC:
    """--host, --port, --open and --read-database: shared by ``tickwork run`` and
    ``tickwork api``."""
    for option in reversed((
        setting("--host", metavar="ADDRESS", env="TICKWORK_HOST",
                help="listen on this address (default 127.0.0.1)"),
        setting("--port", metavar="PORT", env="TICKWORK_PORT",
                help="listen on this port (default 8000)"),
        setting("--open", "open_access", is_flag=True, default=None, env="TICKWORK_OPEN_ACCESS",
                help="no token needed (admin rights for anyone who can connect); only with a "
                "loopback --host"),
        setting("--read-database", metavar="URL", env="TICKWORK_READ_DATABASE",
                help="a read replica of --database: the API's and dashboard's job and run "
                "lists and stats read from it (default: --database)"),
    )):
        command = option(command)
    return command


QUEUES = setting("--queues", metavar="SPEC", env="TICKWORK_QUEUES",
                 help="queues and their concurrency, e.g. default:16,mail:4; a priority after "
                 "an @ (critical:8@10) serves that queue first when Redis is down")
WORKER_ID = setting("--worker-id", metavar="NAME", env="TICKWORK_WORKER_ID",
                    help="name this worker in run history")


@click.command("run", epilog=examples(
    "tickwork run --demo",
    "tickwork run --import myapp.jobs --queues default:16,mail:4",
    "tickwork run --database sqlite:///var/tickwork.db --host 0.0.0.0 --port 8080",
    "tickwork run --redis redis://127.0.0.1:6379/0"))
@QUEUES
@setting("--demo", is_flag=True, default=None, env="TICKWORK_DEMO",
         help="create a few demo jobs to watch run; implies --open on loopback")
@serve_options
@setting("--no-api", "api_enabled", flag_value=False, default=None, env="TICKWORK_API_ENABLED",
         help="do not serve the API and dashboard")
@click.option("--import", "imports", multiple=True, metavar="MODULE",
              help="import MODULE so its @tickwork.job functions become jobs (repeatable)")
@WORKER_ID
@logging_options
@store_options(redis="redis://host:port/db: dispatch through Redis in this process (as the "
               "postgres + redis deployment does)")
async def run(*, target: Target, queues: str | None, demo: bool | None, host: str | None,
              port: str | None, open_access: bool | None, read_database: str | None,
              api_enabled: bool | None, imports: tuple[str, ...], worker_id: str | None) -> int:
    """Run everything in one process (SQLite by default).

    The planner, the rescuer, the worker pool, the REST API and the dashboard. Uses
    sqlite:///tickwork.db unless --database says otherwise, and serves on
    127.0.0.1:8000. Ctrl-C or SIGTERM stops it gracefully: running attempts get
    shutdown_grace_seconds to finish.
    """
    from tickwork.cli.demo import DEMO_JOBS  # noqa: PLC0415  (the service loads to run only)
    from tickwork.runtime.client import load_extra  # noqa: PLC0415
    from tickwork.runtime.embedded import EmbeddedService  # noqa: PLC0415

    if demo and open_access is None and host in (None, "127.0.0.1", "::1", "localhost"):
        open_access = True  # the README's first command shows the dashboard without a token
    settings = settings_from(target, queues=queues, demo=demo, worker_id=worker_id,
                             host=host, port=port, open_access=open_access,
                             read_database=read_database, api_enabled=api_enabled,
                             log_each_run=True if demo else None)
    if settings.redis:
        load_extra("tickwork.drivers.redis.dispatch", "redis", "dispatching through Redis")
    import_modules(imports)
    service = EmbeddedService(settings, imports=imports,
                              jobs=DEMO_JOBS if settings.demo else ())
    await service.run_until_signalled()
    service.exit_now_if_threads_abandoned()
    return 0


@click.command("migrate", epilog=examples(
    "tickwork migrate",
    "tickwork migrate --database postgresql://tickwork@db.internal/tickwork"))
@store_options()
async def migrate(target: Target) -> int:
    """Create or upgrade the database schema.

    `tickwork run` does this itself; on PostgreSQL, run it once before starting schedulers
    and workers (concurrent runs are safe).
    """
    from tickwork.drivers import open_driver  # noqa: PLC0415  (the store loads to use it)

    settings = settings_from(target)
    driver = open_driver(settings.database)
    try:
        await driver.migrate()
    finally:
        await driver.close()
    print(f"database {settings.database} is up to date")
    return 0
