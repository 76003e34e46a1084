"""The namespace conformance suite against SQLite (a file under tmp_path) and PostgreSQL (a
database of its own per test, skipped without PostgreSQL unless CI=true), and claimers racing
on one namespace's hourly quota."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.testing.conformance.namespaces import (
    NamespaceConformance,
    RunQuotaConformance,
    T,
    due_runs,
    runs_this_hour,
    set_runs_quota,
)
from tickwork.testing.factories import claim


class TestSqliteNamespaces(NamespaceConformance, RunQuotaConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteStore]:
        s = SqliteStore(f"sqlite:///{tmp_path}/t.db")
        await s.migrate()
        yield s
        await s.close()


class TestPostgresNamespaces(NamespaceConformance, RunQuotaConformance):
    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[PostgresStore]:
        s = PostgresStore(postgres_url)
        await s.migrate()
        yield s
        await s.close()


async def test_concurrent_claimers_never_pass_the_hourly_quota(postgres_url: str) -> None:
    """Claimers of one namespace take turns on its hour's row: together they start no more
    than the quota, and the count they keep is what they started."""
    stores = [PostgresStore(postgres_url) for _ in range(4)]
    try:
        await stores[0].migrate()
        await due_runs(stores[0], "a", 40)
        await set_runs_quota(stores[0], "a", 7)
        results = await asyncio.gather(*(
            claim(s, T, worker=f"w{i}", limit=10) for i, s in enumerate(stores)))
        assert sum(len(r.claims) for r in results) == 7
        assert await runs_this_hour(stores[0], "a", T) == 7
    finally:
        for s in stores:
            await s.close()
