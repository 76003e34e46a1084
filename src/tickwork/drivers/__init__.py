"""Storage drivers, chosen by the database URL."""

from __future__ import annotations

import re

from tickwork.drivers.base import Store
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError


def open_store(url: str) -> Store:
    """A store for ``sqlite:///path`` (the embedded default) or ``postgresql://...``."""
    if url.startswith("sqlite:") or "://" not in url:
        return SqliteStore(url)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from tickwork.drivers.postgres.store import PostgresStore  # noqa: PLC0415  (optional dependency, loaded only for PostgreSQL)
        except ImportError as exc:
            raise ConfigError("database", "PostgreSQL needs the postgres extra: "
                              "pip install 'tickwork[postgres]'") from exc
        return PostgresStore(url)
    scheme = url.split("://", 1)[0]
    raise ConfigError("database", f"unsupported database URL scheme {scheme!r}; "
                      "expected sqlite:///path or postgresql://...")


def safe_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)
