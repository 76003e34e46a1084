"""The size of the tables a run leaves behind, sampled while it lasts: do they stay bounded?

At a million one-off jobs a day, jobs, occurrences and attempts grow by as much every day;
only the pruner keeps them bounded. ``tickwork bench w2 --retention 3m`` gives the processes a
retention of minutes, and this sampler reads, every few seconds over a connection of its own,
each table's row count and its bytes on disk:

- PostgreSQL: ``pg_total_relation_size`` (table, indexes, TOAST), summed over the partitions
  of a partitioned table (attempts).
- SQLite: the bytes of the pages each table and its indexes use, from the ``dbstat`` virtual
  table when the SQLite library has it; else only the pages the whole file uses
  (``page_count - freelist_count``), under ``database``, with no per-table bytes.

``flatness`` then says per table whether it stayed flat: the maximum over the last third of
the run at most 10 % above the maximum over the middle third (or a small absolute slack, for
tables that are tiny anyway). The first third is the tables filling up to one retention.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tickwork.bench.deploy import is_postgres
from tickwork.drivers.sqlite.connection import path_from_url

TABLES = ("jobs", "occurrences", "attempts")
SAMPLE_SECONDS = 5.0  # how often the sampler reads: measurement, not a test wait
FLAT_RATIO = 1.10
SLACK = {"rows": 1000, "bytes": 1 << 20}  # below this, growth is noise (tiny tables)
MIB = 1 << 20

Reading = tuple[dict[str, int], dict[str, int | None]]  # rows, bytes (None: not known)


class TableReader(Protocol):
    method: str

    async def read(self) -> Reading: ...

    async def close(self) -> None: ...


class PostgresTables:
    """Counts and sizes over one autocommit connection of the sampler's own."""

    method = "pg_total_relation_size"

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, url: str) -> PostgresTables:
        import psycopg  # noqa: PLC0415  (the postgres extra, only for PostgreSQL runs)

        return cls(await psycopg.AsyncConnection.connect(url, autocommit=True,
                                                         connect_timeout=10))

    async def read(self) -> Reading:
        from psycopg import sql  # noqa: PLC0415

        rows: dict[str, int] = {}
        size: dict[str, int | None] = {}
        for table in TABLES:
            cur = await self.conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
            rows[table] = int((await cur.fetchone())[0])
            # pg_partition_tree lists the parent and its partitions; nothing for a plain table.
            cur = await self.conn.execute(
                "SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) "
                "FROM pg_partition_tree(%(t)s::regclass)), "
                "pg_total_relation_size(%(t)s::regclass))", {"t": table})
            size[table] = int((await cur.fetchone())[0])
        cur = await self.conn.execute("SELECT pg_database_size(current_database())")
        size["database"] = int((await cur.fetchone())[0])
        return rows, size

    async def close(self) -> None:
        await self.conn.close()


class SqliteTables:
    """Counts and page sizes over a connection of the sampler's own (WAL: reads never block
    the service's writes), in a thread."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False, timeout=10)
        try:
            self.conn.execute("SELECT 1 FROM dbstat LIMIT 1").fetchall()
            self.method = "dbstat"
        except sqlite3.OperationalError:  # a library built without SQLITE_ENABLE_DBSTAT_VTAB
            self.method = "pages"

    @classmethod
    async def open(cls, url: str) -> SqliteTables:
        return await asyncio.to_thread(cls, path_from_url(url))

    def _read(self) -> Reading:
        rows = {t: int(self.conn.execute(
                    f'SELECT count(*) FROM "{t}"').fetchone()[0])  # noqa: S608  (TABLES)
                for t in TABLES}
        size: dict[str, int | None] = dict.fromkeys(TABLES)
        if self.method == "dbstat":
            for table in TABLES:  # the table's b-tree and its indexes', one at a time
                trees = [r[0] for r in self.conn.execute(
                    "SELECT name FROM sqlite_master WHERE tbl_name = ? AND rootpage > 0",
                    (table,))]
                size[table] = sum(int(self.conn.execute(
                    "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ?",
                    (tree,)).fetchone()[0]) for tree in trees)
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
        page_size = self.conn.execute("PRAGMA page_size").fetchone()[0]
        size["database"] = (pages - free) * page_size
        return rows, size

    async def read(self) -> Reading:
        return await asyncio.to_thread(self._read)

    async def close(self) -> None:
        await asyncio.to_thread(self.conn.close)


async def open_reader(url: str) -> TableReader:
    if is_postgres(url):
        return await PostgresTables.open(url)
    return await SqliteTables.open(url)


class TableSampler:
    """Samples every ``every`` seconds from ``start()`` to ``stop()``; says (``say``) when each
    ``retention`` has passed, with the tables' size then."""

    def __init__(self, reader: TableReader, *, retention: float | None,
                 every: float = SAMPLE_SECONDS, say: Callable[[str], None] = lambda _: None,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.reader = reader
        self.now = now
        self.retention = retention
        self.every = every
        self.say = say
        self.series: list[dict[str, Any]] = []
        self.failed = 0
        self._origin = 0.0
        self._passed = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._origin = self.now()
        await self.sample()
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> dict[str, Any]:
        """Stop, take a last sample, close the connection; the figures."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        try:
            await self.sample()
        finally:
            await self.reader.close()
        return self.result()

    async def sample(self) -> None:
        t = self.now() - self._origin
        try:
            rows, size = await self.reader.read()
        except Exception:  # a busy database: a gap in the series, not a failed run
            self.failed += 1
            return
        self.series.append({"t": round(t, 1), "rows": rows, "bytes": size})
        if self.retention:
            passed = int(t // self.retention)
            if passed > self._passed:
                self._passed = passed
                self.say(f"retention passed {passed}x ({passed * self.retention:g}s): "
                         + describe(rows, size))

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            await self.sample()

    def result(self) -> dict[str, Any]:
        return {"method": self.reader.method, "sample_seconds": self.every,
                "retention_seconds": self.retention, "retentions_passed": self._passed,
                "samples": len(self.series), "failed_samples": self.failed,
                "verdict": flatness(self.series), "series": self.series}


def describe(rows: dict[str, int], size: dict[str, int | None]) -> str:
    parts = []
    for table in TABLES:
        used = size.get(table)
        mib = "" if used is None else f" {used / MIB:.1f} MiB"
        parts.append(f"{table} {rows[table]:,} rows{mib}")
    return ", ".join(parts)


def flatness(series: Sequence[dict[str, Any]], *, ratio: float = FLAT_RATIO,
             slack: dict[str, int] | None = None) -> dict[str, Any]:
    """Per table: flat when, for rows and for bytes (where known), the last third's maximum
    is at most ``ratio`` times the middle third's plus ``slack``. ``flat`` is None when a
    third has no sample."""
    slack = SLACK if slack is None else slack
    end = series[-1]["t"] if series else 0.0
    middle = [s for s in series if end / 3 <= s["t"] < 2 * end / 3]
    last = [s for s in series if s["t"] >= 2 * end / 3]
    out: dict[str, Any] = {}
    for table in TABLES:
        if not middle or not last:
            out[table] = {"flat": None}
            continue
        verdict: dict[str, Any] = {}
        for measure in ("rows", "bytes"):
            mid = [s[measure].get(table) for s in middle]
            tail = [s[measure].get(table) for s in last]
            if None in mid or None in tail:
                continue
            mid_max, last_max = max(mid), max(tail)
            verdict[measure] = {"middle_max": mid_max, "last_max": last_max,
                                "flat": last_max <= mid_max * ratio + slack[measure]}
        out[table] = {"flat": all(v["flat"] for v in verdict.values()), **verdict}
    known = [v["flat"] for v in out.values()]
    out["bounded"] = None if None in known else all(known)
    return out


async def sampler_for(url: str, *, retention: float | None,
                      say: Callable[[str], None]) -> TableSampler:
    """A sampler over a new connection to ``url``, not started: every ``SAMPLE_SECONDS``, or
    eight times per retention when that is shorter (a short run still fills each third)."""
    every = SAMPLE_SECONDS if retention is None else min(SAMPLE_SECONDS,
                                                         max(0.5, retention / 8))
    return TableSampler(await open_reader(url), retention=retention, every=every, say=say)

