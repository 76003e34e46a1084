"""Storage drivers, chosen by the database URL."""

from __future__ import annotations

from tickwork.drivers.base import Store
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError


def open_store(url: str) -> Store:
    """A store for ``sqlite:///path`` (the embedded default) or ``postgresql://...``."""
    if url.startswith("sqlite:") or "://" not in url:
        return SqliteStore(url)
    if url.startswith(("postgresql://", "postgres://")):
        raise ConfigError("database", "the PostgreSQL driver is not part of this version yet; "
                          "use sqlite:///path")
    scheme = url.split("://", 1)[0]
    raise ConfigError("database", f"unsupported database URL scheme {scheme!r}; "
                      "expected sqlite:///path or postgresql://...")
