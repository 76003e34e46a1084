"""The PostgreSQL SecretStore: the ``secrets`` table of the store's own database.

It keeps a small pool of its own (opened on first use, so a worker whose jobs use no secrets
never connects for them); whoever opens it calls ``close()``. The table comes from the store's
migrations (002, keyed by namespace since 013); run ``PostgresStore.migrate()`` first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

import psycopg

from tickwork.drivers import safe_url
from tickwork.drivers.namespaces import DEFAULT_NAMESPACE
from tickwork.drivers.postgres.connection import Conn, Pool, Q, fetch_all, fetch_one
from tickwork.drivers.postgres.rows import instant
from tickwork.drivers.secrets import SecretNotFound
from tickwork.errors import StoreError


class PostgresSecretStore:
    """``PostgresSecretStore("postgresql://user@host/db")``."""

    def __init__(self, url: str, *, max_pool_size: int = 2) -> None:
        self.url = url
        self._pool = Pool(url, min_size=0, max_size=max_pool_size)

    async def secret_set(self, name: str, ciphertext: bytes, now: datetime, *,
                         namespace: str = DEFAULT_NAMESPACE) -> None:
        async with self._transaction() as conn:
            await conn.execute(Q["secret_upsert"], {"namespace": namespace, "name": name,
                                                    "value": ciphertext, "now": now})

    async def secret_get(self, name: str, *, namespace: str = DEFAULT_NAMESPACE) -> bytes:
        async with self._transaction() as conn:
            row = await fetch_one(conn, Q["secret_get"], (namespace, name))
        if row is None:
            raise SecretNotFound(name, namespace)
        return bytes(row["value"])

    async def secret_list(self, *, namespace: str = DEFAULT_NAMESPACE
                          ) -> list[tuple[str, datetime]]:
        async with self._transaction() as conn:
            rows = await fetch_all(conn, Q["secret_list"], (namespace,))
        return [(str(r["name"]), instant(r["updated_at"])) for r in rows]

    async def secret_namespaces(self) -> list[str]:
        async with self._transaction() as conn:
            rows = await fetch_all(conn, Q["secret_namespaces"])
        return [str(r["namespace"]) for r in rows]

    async def secret_delete(self, name: str, *, namespace: str = DEFAULT_NAMESPACE) -> None:
        async with self._transaction() as conn:
            cur = await conn.execute(Q["secret_delete"], (namespace, name))
            deleted = cur.rowcount
        if not deleted:
            raise SecretNotFound(name, namespace)

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Conn]:
        try:
            async with self._pool.transaction() as conn:
                yield conn
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UndefinedTable):
                raise StoreError(f"PostgreSQL database {safe_url(self.url)} has no secrets "
                                 "table; run `tickwork migrate` first") from exc
            raise
