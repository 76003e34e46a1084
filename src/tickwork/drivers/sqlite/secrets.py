"""The SQLite SecretStore: the ``secrets`` table of the store's own database file.

Each call opens a short-lived connection on a worker thread (WAL lets it sit beside the
store's), so there is nothing to keep open or to close. The table comes from the store's
migrations (002, keyed by namespace since 014); run ``SqliteStore.migrate()`` first.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from tickwork.drivers.namespaces import DEFAULT_NAMESPACE
from tickwork.drivers.secrets import SecretNotFound
from tickwork.drivers.sqlite.connection import path_from_url, write_transaction
from tickwork.drivers.sqlite.rows import from_us, to_us
from tickwork.errors import StoreError, StoreUnavailable

T = TypeVar("T")
BUSY_TIMEOUT_MS = 10_000

UPSERT = """
INSERT INTO secrets (namespace, name, value, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (namespace, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
"""


class SqliteSecretStore:
    """``SqliteSecretStore("sqlite:///tickwork.db")`` (or a plain path)."""

    def __init__(self, url: str) -> None:
        self.path = path_from_url(url)
        if self.path == ":memory:":
            raise StoreError("secrets need a database file; sqlite://:memory: cannot hold them")

    async def secret_set(self, name: str, ciphertext: bytes, now: datetime, *,
                         namespace: str = DEFAULT_NAMESPACE) -> None:
        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(UPSERT, (namespace, name, ciphertext, to_us(now), to_us(now)))

        await self._run(run)

    async def secret_get(self, name: str, *, namespace: str = DEFAULT_NAMESPACE) -> bytes:
        def run(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute("SELECT value FROM secrets WHERE namespace = ? AND name = ?",
                               (namespace, name)).fetchone()
            return None if row is None else bytes(row[0])

        value = await self._run(run)
        if value is None:
            raise SecretNotFound(name, namespace)
        return value

    async def secret_list(self, *, namespace: str = DEFAULT_NAMESPACE
                          ) -> list[tuple[str, datetime]]:
        def run(conn: sqlite3.Connection) -> list[tuple[str, datetime]]:
            rows = conn.execute("SELECT name, updated_at FROM secrets WHERE namespace = ? "
                                "ORDER BY name", (namespace,))
            return [(str(name), from_us(updated)) for name, updated in rows]

        return await self._run(run)

    async def secret_namespaces(self) -> list[str]:
        def run(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT DISTINCT namespace FROM secrets ORDER BY namespace")
            return [str(namespace) for (namespace,) in rows]

        return await self._run(run)

    async def secret_delete(self, name: str, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        def run(conn: sqlite3.Connection) -> int:
            with write_transaction(conn):
                return conn.execute("DELETE FROM secrets WHERE namespace = ? AND name = ?",
                                    (namespace, name)).rowcount

        if not await self._run(run):
            raise SecretNotFound(name, namespace)

    async def close(self) -> None:
        """Nothing is kept open."""

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None)
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"SQLite database {self.path}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            return fn(conn)
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                raise StoreError(f"SQLite database {self.path} has no secrets table; run "
                                 "`tickwork migrate` first") from exc
            if "locked" in str(exc):
                raise StoreUnavailable(f"SQLite database {self.path}: {exc}") from exc
            raise StoreError(f"SQLite database {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"SQLite database {self.path}: {exc}") from exc
        finally:
            conn.close()
