"""The limits conformance suite against SQLite: a file under tmp_path."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.drivers import open_driver
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.testing.conformance.limits import LimitConformance


class TestSqliteLimits(LimitConformance):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[SqliteStore]:
        s = SqliteStore(f"sqlite:///{tmp_path}/t.db")
        await s.migrate()
        yield s
        await s.close()


def test_the_driver_says_it_enforces_limits(tmp_path: Path) -> None:
    assert open_driver(f"sqlite:///{tmp_path}/t.db").limits
