"""A private Redis Cluster and a private Sentinel deployment, shared by the tests of a module.

Starting either takes seconds, so a test module starts one for all its tests (each test still
gets a key prefix of its own, as on the shared server). The servers' processes belong to an
event loop of their own, on a thread of its own: a module-scoped fixture outlives the event
loop of each test, and the servers' output must be read all along.

Fault tests that kill nodes use a function-scoped deployment instead
(``tickwork.testing.faults.rediscluster`` and ``redissentinel``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from tickwork.testing.faults.rediscluster import PrivateCluster
from tickwork.testing.faults.redissentinel import PrivateSentinel
from tickwork.testing.faults.redisserver import need_binaries

T = TypeVar("T")
START_TIMEOUT = 120.0


class BackgroundLoop:
    """An event loop running on a thread of its own until ``close()``."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="tickwork-test-servers")
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = START_TIMEOUT) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[PrivateCluster]:
    """A private 3-master cluster with a replica each, for the tests of one module."""
    need_binaries()
    background = BackgroundLoop()
    cluster = PrivateCluster()
    try:
        yield background.run(cluster.start())
    finally:
        background.run(cluster.stop())
        background.close()


@pytest.fixture(scope="module")
def redis_sentinel() -> Iterator[PrivateSentinel]:
    """A private master, replica and 3 sentinels, for the tests of one module."""
    need_binaries()
    background = BackgroundLoop()
    deployment = PrivateSentinel()
    try:
        yield background.run(deployment.start())
    finally:
        background.run(deployment.stop())
        background.close()
