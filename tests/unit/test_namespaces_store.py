"""The namespace conformance suite against SQLite (a file under tmp_path) and PostgreSQL (a
database of its own per test, skipped without PostgreSQL unless CI=true)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.testing.conformance.namespaces import NamespaceConformance


class TestSqliteNamespaces(NamespaceConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteStore]:
        s = SqliteStore(f"sqlite:///{tmp_path}/t.db")
        await s.migrate()
        yield s
        await s.close()


class TestPostgresNamespaces(NamespaceConformance):
    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[PostgresStore]:
        s = PostgresStore(postgres_url)
        await s.migrate()
        yield s
        await s.close()
