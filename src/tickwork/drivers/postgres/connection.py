"""A psycopg connection pool, one transaction per store call, errors translated at the edge.

Every session runs with ``TimeZone = UTC``. Users never see a raw psycopg exception: a lost or
refused connection becomes ``StoreUnavailable``, anything else ``StoreError`` (the store turns
the few it expects, such as a duplicate name, into ``Conflict`` first).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, LiteralString

import psycopg
import psycopg_pool
from psycopg.rows import DictRow, dict_row

from tickwork.drivers.sqlfiles import load_queries
from tickwork.errors import StoreError, StoreUnavailable

Conn = psycopg.AsyncConnection[DictRow]

# Queries come from our own files, not from user input: as trusted as literals.
Q: dict[str, LiteralString] = load_queries("tickwork.drivers.postgres")

CONNECT_OPTIONS = "-c timezone=UTC"


def safe_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


def libpq_url(url: str) -> str:
    """``postgres://`` and ``postgresql+psycopg://`` spelled the way libpq reads them."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in ("postgres", "postgresql+psycopg"):
        return f"postgresql://{rest}"
    return url


def translate(exc: BaseException, url: str) -> StoreError:
    where = f"PostgreSQL database {safe_url(url)}"
    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg.OperationalError):
        return StoreUnavailable(f"{where}: cannot connect or lost the connection: "
                                f"{_first_line(exc)}")
    return StoreError(f"{where}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class Pool:
    """Opened on first use, so a store can be built outside an event loop."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10,
                 connect_timeout: float = 10.0) -> None:
        self.url = libpq_url(url)
        self._connect_timeout = connect_timeout
        self._pool: psycopg_pool.AsyncConnectionPool[Conn] = psycopg_pool.AsyncConnectionPool(
            self.url, min_size=min_size, max_size=max_size, open=False,
            kwargs={"options": CONNECT_OPTIONS, "row_factory": dict_row,
                    "connect_timeout": max(1, int(connect_timeout))},
            connection_class=psycopg.AsyncConnection[DictRow], timeout=connect_timeout,
            name="tickwork")
        self._opened = False
        self._opening = asyncio.Lock()

    async def _open(self) -> None:
        if self._opened:
            return
        async with self._opening:
            await self._open_once()

    async def _open_once(self) -> None:
        if not self._opened:
            # One plain connection first: a refused or misnamed database fails at once, with
            # the server's own words, instead of after the pool's retries time out.
            probe = await psycopg.AsyncConnection.connect(
                self.url, options=CONNECT_OPTIONS, connect_timeout=max(1, int(
                    self._connect_timeout)))
            await probe.close()
            self._opened = True
            try:
                await self._pool.open(wait=True, timeout=self._connect_timeout)
            except BaseException:
                self._opened = False
                await self._pool.close()
                raise

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        try:
            await self._open()
            async with self._pool.connection() as conn:
                yield conn
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise translate(exc, self.url) from exc

    async def close(self) -> None:
        if self._opened:
            await self._pool.close()
            self._opened = False


async def fetch_all(conn: Conn, query: LiteralString, params: Any = None) -> list[DictRow]:
    cur = await conn.execute(query, params)
    return await cur.fetchall()


async def fetch_one(conn: Conn, query: LiteralString, params: Any = None) -> DictRow | None:
    cur = await conn.execute(query, params)
    return await cur.fetchone()
