"""PostgreSQL for tests: a database per test, copied from a migrated template made once a run.

``TICKWORK_TEST_POSTGRES_URL`` names the server (default ``postgresql://postgres@127.0.0.1:5432/
test``). When it cannot be reached, tests that need it are skipped with a message saying so;
with ``CI=true`` they fail instead, because a missing service in CI is a failure.

Every database made here is named ``tickwork_test_...`` and dropped when its test ends.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tickwork.drivers.postgres.store import PostgresStore
from tickwork.executors.base import ExecutionContext

ADMIN_URL_ENV = "TICKWORK_TEST_POSTGRES_URL"
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
PREFIX = "tickwork_test_"


def admin_url() -> str:
    return os.environ.get(ADMIN_URL_ENV, DEFAULT_ADMIN_URL)


def url_of(database: str) -> str:
    """The admin URL with its database replaced."""
    base, _, _ = admin_url().rpartition("/")
    return f"{base}/{database}"


def _unreachable(reason: str) -> None:
    message = f"PostgreSQL is not reachable at {admin_url()} ({reason}); set {ADMIN_URL_ENV}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}. CI=true: a missing service is a failure here.")
    pytest.skip(message)


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(admin_url(), autocommit=True, connect_timeout=5)


def create_database(template: str | None = None) -> str:
    name = f"{PREFIX}{uuid.uuid4().hex[:12]}"
    query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template:
        query = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template))
    with _admin() as conn:
        conn.execute(query)
    return name


def drop_database(name: str) -> None:
    if not name.startswith(PREFIX):
        raise ValueError(f"refusing to drop {name!r}: not a test database")
    with _admin() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))


def _run(coro: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine to completion on a private loop (from a sync fixture)."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coro).result()


async def _migrate(url: str) -> None:
    store = PostgresStore(url)
    try:
        await store.migrate()
    finally:
        await store.close()


def require_server() -> None:
    """Skip (or under CI=true fail) the calling test when the server cannot be reached."""
    try:
        with _admin():
            pass
    except psycopg.OperationalError as exc:
        _unreachable(str(exc).strip().splitlines()[0] if str(exc).strip() else "refused")


@contextmanager
def scratch_database() -> Iterator[str]:
    """The URL of a new, empty (not migrated) database, dropped afterwards."""
    require_server()
    name = create_database()
    try:
        yield url_of(name)
    finally:
        drop_database(name)


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A migrated database that per-test databases are copied from."""
    require_server()
    name = create_database()
    try:
        _run(_migrate(url_of(name)))
        yield name
    finally:
        drop_database(name)


@pytest.fixture
def postgres_url(postgres_template: str) -> Iterator[str]:
    """The URL of a fresh, migrated database of this test's own."""
    name = create_database(template=postgres_template)
    try:
        yield url_of(name)
    finally:
        drop_database(name)


@pytest.fixture
async def postgres_store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    """A PostgresStore on this test's own database, closed when the test ends."""
    store = PostgresStore(postgres_url)
    await store.migrate()
    yield store
    await store.close()


def database_of(url: str) -> str:
    return url.rpartition("/")[2]


# -- jobs for tests that watch a job while it runs ------------------------------------------


@dataclass
class Gate:
    started: threading.Event
    release: threading.Event


GATES: dict[str, Gate] = {}


def gate(name: str) -> Gate:
    """The events a ``gated`` job with this name sets and waits on (in this process)."""
    return GATES.setdefault(name, Gate(threading.Event(), threading.Event()))


def gated(ctx: ExecutionContext, name: str, timeout: float = 30.0) -> str:
    """A job that says it started, then waits until the test releases it."""
    g = gate(name)
    g.started.set()
    g.release.wait(timeout)
    return f"released {ctx.idempotency_key}"


def started_then_record(ctx: ExecutionContext, path: str, started_path: str,
                        sleep: float = 0.0) -> str:
    """Append a line to ``started_path`` when it starts, then run ``ledger.record``."""
    from tickwork.testing import ledger  # noqa: PLC0415  (only what this job needs)

    with open(started_path, "a", encoding="utf-8") as f:
        f.write(f"{ctx.idempotency_key} {ctx.attempt} {os.getpid()} {time.time()}\n")
        f.flush()
        os.fsync(f.fileno())
    return ledger.record(ctx, path, sleep=sleep)


# -- the schema, as the catalog describes it ------------------------------------------------

SCHEMA_QUERIES = (
    ("table", """
        SELECT c.relname || CASE c.relkind WHEN 'p' THEN ' (partitioned by '
               || pg_get_partkeydef(c.oid) || ')' ELSE '' END
               || CASE WHEN c.relispartition THEN ' partition of ' || pi.inhparent::regclass::text
                       || ' ' || pg_get_expr(c.relpartbound, c.oid) ELSE '' END
        FROM pg_class c LEFT JOIN pg_inherits pi ON pi.inhrelid = c.oid
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
          AND c.relname NOT LIKE 'attempts\\_p%'
        ORDER BY 1"""),
    ("column", """
        SELECT table_name || '.' || column_name || ' ' || data_type
               || COALESCE(' collate ' || collation_name, '')
               || CASE is_nullable WHEN 'NO' THEN ' not null' ELSE '' END
               || COALESCE(' default ' || column_default, '')
        FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name NOT LIKE 'attempts\\_p%'
        ORDER BY table_name, ordinal_position"""),
    ("index", """
        SELECT indexdef FROM pg_indexes
        WHERE schemaname = current_schema() AND tablename NOT LIKE 'attempts\\_p%'
        ORDER BY tablename, indexname"""),
)


async def describe_schema(url: str) -> str:
    """Tables, columns and indexes of a database, one per line, in a stable order."""
    lines: list[str] = []
    async with await psycopg.AsyncConnection.connect(url) as conn:
        for kind, query in SCHEMA_QUERIES:
            for (text,) in await (await conn.execute(query)).fetchall():
                lines.append(f"{kind} {text}")
    return "\n".join(lines) + "\n"
