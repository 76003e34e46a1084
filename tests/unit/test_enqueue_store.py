"""The enqueue and purge conformance suite against SQLite (a file under tmp_path) and
PostgreSQL (a database of its own per test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.testing.conformance.enqueue import EnqueueConformance


class TestSqliteEnqueue(EnqueueConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteStore]:
        s = SqliteStore(f"sqlite:///{tmp_path}/t.db")
        await s.migrate()
        yield s
        await s.close()

    @pytest.fixture
    async def peer_store(self, store: SqliteStore, tmp_path: Path) -> AsyncIterator[SqliteStore]:
        s = SqliteStore(f"sqlite:///{tmp_path}/t.db")
        yield s
        await s.close()


class TestPostgresEnqueue(EnqueueConformance):
    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[PostgresStore]:
        s = PostgresStore(postgres_url)
        await s.migrate()
        yield s
        await s.close()

    @pytest.fixture
    async def peer_store(self, store: PostgresStore,
                         postgres_url: str) -> AsyncIterator[PostgresStore]:
        s = PostgresStore(postgres_url)
        yield s
        await s.close()
