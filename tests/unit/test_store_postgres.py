"""The Store conformance suite against PostgreSQL: a database of its own per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tickwork.drivers.postgres.store import PostgresStore
from tickwork.testing.conformance.store import StoreConformance


class TestPostgresStore(StoreConformance):
    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[PostgresStore]:
        s = PostgresStore(postgres_url)
        await s.migrate()
        yield s
        await s.close()

    @pytest.fixture
    async def peer_store(self, store: PostgresStore,
                         postgres_url: str) -> AsyncIterator[PostgresStore]:
        """Another pool on the same database, as a second process would open it."""
        s = PostgresStore(postgres_url)
        yield s
        await s.close()
