"""A psycopg connection pool, one transaction per store call, errors translated at the edge.

Every session runs with ``TimeZone = UTC``. Users never see a raw psycopg exception: a lost or
refused connection becomes ``StoreUnavailable``, anything else ``StoreError`` (the store turns
the few it expects, such as a duplicate name, into ``Conflict`` first).

The server going away (a restart, a crash, a network cut) is logged once, as a warning, and
its return once; meanwhile each call tries one connection of its own and fails at once
(``StoreUnavailable`` with ``logged`` set, so loops that retry need not log it again) instead of
waiting on the pool. A connection the server closed while it sat in the pool is dropped when it
is next taken, not handed out: the first call after a restart works.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, LiteralString

import psycopg
import psycopg_pool
from psycopg.rows import DictRow, dict_row, tuple_row

from tickwork.drivers import safe_url
from tickwork.drivers.sqlfiles import load_queries
from tickwork.errors import StoreError, StoreUnavailable

Conn = psycopg.AsyncConnection[DictRow]

# Queries come from our own files, not from user input: as trusted as literals.
Q: dict[str, LiteralString] = load_queries("tickwork.drivers.postgres")

CONNECT_OPTIONS = "-c timezone=UTC"
# psycopg_pool retries a failed connection with a doubling, uncapped delay (1, 2, 4, ... s) for
# five minutes, so a server back after 30 s could wait as long again for the pool to notice.
# Giving up after a second instead, the pool connects anew on the next call that needs it.
RECONNECT_SECONDS = 1.0

log = logging.getLogger("tickwork.store")


def libpq_url(url: str) -> str:
    """``postgres://`` and ``postgresql+psycopg://`` spelled the way libpq reads them."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in ("postgres", "postgresql+psycopg"):
        return f"postgresql://{rest}"
    return url


def translate(exc: BaseException, url: str, *, logged: bool = False) -> StoreError:
    where = f"PostgreSQL database {safe_url(url)}"
    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg.OperationalError):
        return StoreUnavailable(f"{where}: cannot connect or lost the connection: "
                                f"{_first_line(exc)}", logged=logged)
    return StoreError(f"{where}: {_first_line(exc)}")


def server_away(exc: BaseException) -> bool:
    """Whether ``exc`` says the server cannot be reached or dropped the connection (not a
    statement that failed: a deadlock or a cancelled query is an OperationalError too)."""
    if not isinstance(exc, psycopg.OperationalError) or isinstance(exc, psycopg_pool.PoolClosed):
        return False  # (a PoolTimeout is an OperationalError: no connection could be made)
    state = exc.sqlstate
    # None: libpq's own (refused, closed unexpectedly); 08: connection exception; 57P01-03:
    # the server is shutting down, crashed, or not accepting connections yet (recovery).
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class Pool:
    """Opened on first use, so a store can be built outside an event loop."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10,
                 connect_timeout: float = 10.0) -> None:
        self.url = libpq_url(url)
        self._connect_timeout = connect_timeout
        self._max_size = max_size
        self._pool: psycopg_pool.AsyncConnectionPool[Conn] = psycopg_pool.AsyncConnectionPool(
            self.url, min_size=min_size, max_size=max_size, open=False,
            kwargs={"options": CONNECT_OPTIONS, "row_factory": dict_row,
                    "connect_timeout": max(1, int(connect_timeout))},
            connection_class=psycopg.AsyncConnection[DictRow], timeout=connect_timeout,
            reconnect_timeout=RECONNECT_SECONDS, name="tickwork")
        self._opened = False
        self._opening = asyncio.Lock()
        self._down_since: float | None = None  # monotonic: the server went away then

    async def _open(self) -> None:
        if self._opened:
            return
        async with self._opening:
            await self._open_once()

    async def _open_once(self) -> None:
        if not self._opened:
            # One plain connection first: a refused or misnamed database fails at once, with
            # the server's own words, instead of after the pool's retries time out.
            await self._connect_once()
            self._opened = True
            try:
                await self._pool.open(wait=True, timeout=self._connect_timeout)
            except BaseException:
                self._opened = False
                await self._pool.close()
                raise

    def transaction(self) -> AbstractAsyncContextManager[Conn]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        return self._connection(autocommit=False)

    def statement(self) -> AbstractAsyncContextManager[Conn]:
        """A connection for one statement, which is its own transaction (autocommit): no
        BEGIN and COMMIT round trips. Only for a block that runs a single statement."""
        return self._connection(autocommit=True)

    @asynccontextmanager
    async def _connection(self, *, autocommit: bool) -> AsyncIterator[Conn]:
        try:
            await self._open()
            if self._down_since is not None:
                await self._connect_once()  # raises at once while the server is still away
                self._back()
            conn = await self._getconn()
            try:
                if autocommit:
                    await conn.set_autocommit(True)
                async with conn:  # commits, or rolls back if the block raises
                    yield conn
            finally:
                if autocommit and not conn.closed:
                    with contextlib.suppress(psycopg.Error):  # broken: the pool replaces it
                        await conn.set_autocommit(False)
                await self._pool.putconn(conn)  # a broken one is replaced by a new one
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            away = await self._away(exc)
            error = translate(exc, self.url, logged=away)
            if away and self._down_since is None:
                self._down_since = time.monotonic()
                log.warning("%s; retrying until it answers (not logged again until then)", error)
            raise error from exc

    async def _away(self, exc: BaseException) -> bool:
        """Whether the server is away, rather than the pool busy or a statement failed."""
        if not server_away(exc):
            return False
        if isinstance(exc, psycopg_pool.PoolTimeout) and self._down_since is None:
            try:  # every connection busy for the pool's whole timeout, or none to be made?
                await self._connect_once()
            except psycopg.Error:
                return True
            return False
        return True

    async def _connect_once(self) -> None:
        """One connection of our own, closed at once: raises if the server cannot be reached."""
        probe = await psycopg.AsyncConnection.connect(
            self.url, options=CONNECT_OPTIONS, connect_timeout=max(1, int(self._connect_timeout)))
        await probe.close()

    def _back(self) -> None:
        if self._down_since is not None:
            log.info("PostgreSQL database %s answers again, after %.1fs", safe_url(self.url),
                     time.monotonic() - self._down_since)
            self._down_since = None

    async def _getconn(self) -> Conn:
        """A pooled connection, passing over those the server closed while they sat idle. Only
        a connection the server sent something to while idle (as it does when it shuts down or
        ends the backend) costs a round trip to check."""
        for _ in range(self._max_size):
            conn = await self._pool.getconn()
            if not _has_input(conn):
                return conn
            try:
                await psycopg_pool.AsyncConnectionPool.check_connection(conn)
            except psycopg.Error:
                await self._pool.putconn(conn)  # closed: the pool drops it and connects anew
                await self._connect_once()  # the server itself gone? raise now, do not wait
                continue
            return conn
        return await self._pool.getconn()

    async def close(self) -> None:
        if self._opened:
            await self._pool.close()
            self._opened = False


def _has_input(conn: Conn) -> bool:
    """Whether an idle connection has something to read (a notice, the end of the stream);
    never blocks."""
    if conn.closed:
        return True
    poller = select.poll()
    poller.register(conn.pgconn.socket, select.POLLIN)
    return bool(poller.poll(0))


async def fetch_all(conn: Conn, query: LiteralString, params: Any = None, *,
                    binary: bool = False) -> list[DictRow]:
    """``binary``: rows in PostgreSQL's binary format, cheaper to decode (instants, integers)
    for the wide rows a claim reads; the values are the same Python objects."""
    cur = await conn.execute(query, params, binary=binary)
    return await cur.fetchall()


async def fetch_tuples(conn: Conn, query: LiteralString, params: Any = None
                       ) -> list[tuple[Any, ...]]:
    """Rows as tuples, for the narrow rows read once per run (a dict per row costs a call to
    build it; a tuple comes straight from the driver's C)."""
    cur = conn.cursor(row_factory=tuple_row)
    await cur.execute(query, params)
    return await cur.fetchall()


async def fetch_one(conn: Conn, query: LiteralString, params: Any = None) -> DictRow | None:
    cur = await conn.execute(query, params)
    return await cur.fetchone()
