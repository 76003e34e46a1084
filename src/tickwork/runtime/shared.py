"""The database that scheduler and worker processes share: PostgreSQL, the one backend whose
driver says ``shared`` (many processes on many machines)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tickwork.config import Settings
from tickwork.drivers import POSTGRES, backend_of
from tickwork.errors import ConfigError

if TYPE_CHECKING:
    from tickwork.drivers.postgres import PostgresDriver


def open_shared_driver(settings: Settings, **store_options: Any) -> PostgresDriver:
    """The PostgreSQL driver of ``settings.database``, or ConfigError saying what to use."""
    if backend_of(settings.database) != POSTGRES:
        raise ConfigError("database", "tickwork scheduler and tickwork worker share a "
                          "PostgreSQL database: use --database postgresql://... "
                          "(for one process on SQLite, use tickwork run)")
    from tickwork.drivers.postgres import PostgresDriver  # noqa: PLC0415  (the postgres extra)

    return PostgresDriver(settings.database, **store_options)
