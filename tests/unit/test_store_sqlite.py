"""The Store conformance suite against SQLite: a fresh file under tmp_path per test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.testing.conformance.store import StoreConformance


class TestSqliteStore(StoreConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteStore]:
        s = SqliteStore(f"sqlite:///{tmp_path}/t.db")
        await s.migrate()
        yield s
        await s.close()

    @pytest.fixture
    async def peer_store(self, store: SqliteStore, tmp_path: Path) -> AsyncIterator[SqliteStore]:
        """Another connection to the same file, as a second process would open it."""
        s = SqliteStore(f"sqlite:///{tmp_path}/t.db")
        yield s
        await s.close()
