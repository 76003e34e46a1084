"""One SQLite connection on one thread, with the settings tickwork relies on.

WAL for concurrent readers, ``synchronous=FULL`` so a committed write survives power loss, a busy
timeout so a second process waits instead of failing, and explicit ``BEGIN IMMEDIATE`` for
every write transaction so the write lock is taken up front.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from tickwork.errors import StoreError, StoreUnavailable

T = TypeVar("T")


def path_from_url(url: str) -> str:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://:memory:`` or a path."""
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///") or "tickwork.db"
    if url.startswith("sqlite://"):
        return url.removeprefix("sqlite://")
    return url


class Connection:
    """Runs functions against a private connection on a dedicated thread."""

    def __init__(self, path: str, *, busy_timeout_ms: int = 10_000) -> None:
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tickwork-sqlite")
        self._conn: sqlite3.Connection | None = None

    def _open(self) -> sqlite3.Connection:
        if self._conn is None:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = OFF")
            self._conn = conn
        return self._conn

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return fn(self._open())
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "unable to open" in str(exc):
                raise StoreUnavailable(f"SQLite database {self.path}: {exc}") from exc
            raise StoreError(f"SQLite database {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"SQLite database {self.path}: {exc}") from exc

    async def close(self) -> None:
        def _close(_: sqlite3.Connection) -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        if self._conn is not None:
            await self.run(_close)
        self._thread.shutdown(wait=True)


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
