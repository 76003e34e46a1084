"""Shared fixtures, from the package's own test support (tickwork.testing)."""

import pytest

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
