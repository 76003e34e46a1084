"""The client a process or a command opens on the configured database.

A command that only reads or changes what exists opens it with ``create=False``: a missing or
unmigrated database is refused, not made. With Redis configured, what the client triggers or
backfills goes straight into Redis' due set.
"""

from __future__ import annotations

import importlib

from tickwork.client import AsyncClient
from tickwork.clock import SystemClock
from tickwork.config import Settings
from tickwork.drivers import Driver, open_driver, safe_url
from tickwork.drivers.base import Store
from tickwork.errors import ConfigError, NotMigrated
from tickwork.executors.admission import JobPolicy


async def client_for(settings: Settings, *, create: bool = True,
                     driver: Driver | None = None,
                     namespace: str | None = None) -> AsyncClient:
    """A client on the configured store (``driver``'s, when given), seeing ``namespace``
    (None: every namespace); with Redis configured,
    what it triggers or backfills goes straight into Redis' due set. Closing the client
    closes the store."""
    driver = driver or open_driver(settings.database)
    try:
        if create:
            await driver.migrate()
        else:
            await require_schema(driver.store, settings.database)
        after_insert, close_dispatch = None, None
        if settings.redis:
            load_extra("tickwork.drivers.redis.dispatch", "redis", "dispatching through Redis")
            # redis is an extra: imported only when configured
            from tickwork.drivers.feeder import DueFeeder  # noqa: PLC0415
            from tickwork.drivers.redis.dispatch import RedisDispatch  # noqa: PLC0415

            dispatch = RedisDispatch.from_url(settings.redis)
            after_insert = DueFeeder(dispatch, SystemClock()).add_waiting
            close_dispatch = dispatch.close
    except BaseException:
        await driver.close()
        raise
    client = AsyncClient(driver.store, policy=JobPolicy(settings.executors, runs_jobs=False),
                         after_insert=after_insert, namespace=namespace)
    if close_dispatch is not None:
        client.on_close(close_dispatch)
    return client


async def read_client_for(settings: Settings) -> AsyncClient | None:
    """A client on ``read_database`` (a read replica) for the API's lists and stats, or None
    when it is not set (they read the primary). It never migrates: a replica is read-only,
    and its schema arrives by replication, so an unmigrated one is refused."""
    if settings.read_database is None:
        return None
    driver = open_driver(settings.read_database)
    try:
        await require_schema(driver.store, settings.read_database)
    except BaseException:
        await driver.close()
        raise
    return AsyncClient(driver.store)


EXTRA_PACKAGES = {"redis": "redis", "hiredis": "redis", "psycopg": "postgres",
                  "psycopg_pool": "postgres", "psycopg_binary": "postgres"}


def load_extra(module: str, field: str, what: str) -> None:
    """Import ``module`` now, so a missing optional dependency is one line naming the extra
    to install (``field: WHAT needs the redis extra: pip install 'tickwork[redis]'``)."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        extra = EXTRA_PACKAGES.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        raise ConfigError(field, f"{what} needs the {extra} extra: "
                          f"pip install 'tickwork[{extra}]'") from None


async def require_schema(store: Store, database: str) -> None:
    """Raise NotMigrated unless ``database`` exists with this tickwork's schema; creates
    and changes nothing (a SQLite file that does not exist stays so)."""
    if await store.migrations_pending():
        raise NotMigrated(f"database {safe_url(database)} does not exist or is not migrated "
                          "to this version of tickwork; run `tickwork migrate` first")
