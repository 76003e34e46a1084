"""Storage drivers: one object per backend, opened from the database URL.

``open_driver(url)`` is the one place a database URL is read for its backend. The driver owns
the backend's parts, its Store, its AdminStore (sharing the store's connection or pool) and its
SecretStore, and says what the backend can do, so no other code sniffs a URL or asks
``isinstance``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Protocol

from tickwork.errors import ConfigError

if TYPE_CHECKING:
    from tickwork.drivers.admin import AdminStore
    from tickwork.drivers.base import Store
    from tickwork.drivers.secrets import SecretStore

SQLITE = "sqlite"
POSTGRES = "postgres"


class Driver(Protocol):
    name: str  # "sqlite" or "postgres"
    url: str
    shared: bool  # many processes on many machines may use it at once (scheduler, worker)
    shards: bool  # schedulers split the jobs by leased shards
    partitions: bool  # history lives in time partitions the pruner drops
    listen: bool  # processes wake each other with LISTEN/NOTIFY
    # Claims obey queue and key limits across every process (drivers/limits.py), whatever
    # dispatches the runs: with Redis dispatch the store still decides (DESIGN rule 1).
    limits: bool

    @property
    def store(self) -> Store: ...

    @property
    def admin(self) -> AdminStore: ...

    def secret_store(self) -> SecretStore:
        """A SecretStore on a connection of its own, in the same database."""
        ...

    async def migrate(self) -> None: ...

    async def close(self) -> None: ...


def backend_of(url: str) -> str:
    """``sqlite`` or ``postgres`` for a database URL, or ConfigError naming the scheme."""
    lowered = url.lower()
    if lowered.startswith("sqlite:") or "://" not in url:
        return SQLITE
    if lowered.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        return POSTGRES
    scheme = url.split("://", 1)[0]
    raise ConfigError("database", f"unsupported database URL scheme {scheme!r}; "
                      "expected sqlite:///path or postgresql://...")


def open_driver(url: str, **postgres_options: Any) -> Driver:
    """The driver for ``sqlite:///path`` (the embedded default) or ``postgresql://...``.
    ``postgres_options`` go to the PostgreSQL store (pool size, server clock, shard count)."""
    if backend_of(url) == SQLITE:
        from tickwork.drivers.sqlite import SqliteDriver  # noqa: PLC0415  (drivers load lazily)

        return SqliteDriver(url)
    try:
        from tickwork.drivers.postgres import PostgresDriver  # noqa: PLC0415  (the postgres extra)
    except ImportError as exc:
        raise ConfigError("database", "PostgreSQL needs the postgres extra: "
                          "pip install 'tickwork[postgres]'") from exc
    return PostgresDriver(url, **postgres_options)


def safe_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)
