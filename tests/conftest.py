"""Shared fixtures, from the package's own test support (tickwork.testing)."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.drivers.base import Store
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore

# Failures inside the conformance suites shipped in the package show their values. This must
# run before anything imports tickwork.testing.
pytest.register_assert_rewrite("tickwork.testing")

pytest_plugins = [
    "pytester",  # pytester: tests of tickwork's pytest plugin, as a user's test run sees it
    "tickwork.testing.harness",  # harness: planner, rescuer and pool on SQLite, FakeClock
    "tickwork.testing.postgres",  # postgres_url: a database per test
    "tickwork.testing.redis",  # redis_prefix, redis_dispatch, ...: a key prefix per test
    "tickwork.testing.faults.redisserver",  # private_redis: a Redis server of one's own
    "tickwork.testing.redis_deployments",  # redis_cluster, redis_sentinel: private, per module
]


@pytest.fixture(params=["sqlite", "postgres"])
async def each_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A migrated store of each driver in turn: SQLite in a file, PostgreSQL in this test's
    own database."""
    store: Store
    if request.param == "sqlite":
        store = SqliteStore(f"sqlite:///{tmp_path}/tickwork.db")
    else:
        store = PostgresStore(request.getfixturevalue("postgres_url"))
    await store.migrate()
    yield store
    await store.close()
