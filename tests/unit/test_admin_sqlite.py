"""The AdminStore and SecretStore conformance suites against SQLite: a file under tmp_path."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.drivers import open_driver
from tickwork.drivers.sqlite.secrets import SqliteSecretStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.testing.conformance.admin import AdminConformance
from tickwork.testing.conformance.secrets import SecretStoreConformance


class TestSqliteAdmin(AdminConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteStore]:
        s = SqliteStore(f"sqlite:///{tmp_path}/t.db")
        await s.migrate()
        yield s
        await s.close()


class TestSqliteSecretStore(SecretStoreConformance):
    @pytest.fixture
    async def secret_store(self, tmp_path: Path) -> AsyncIterator[SqliteSecretStore]:
        url = f"sqlite:///{tmp_path}/t.db"
        store = SqliteStore(url)
        await store.migrate()
        await store.close()
        secrets = open_driver(url).secret_store()
        assert isinstance(secrets, SqliteSecretStore)
        yield secrets
        await secrets.close()
