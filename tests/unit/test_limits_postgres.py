"""The limits conformance suite against PostgreSQL, and claimers racing on one limited queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tickwork.drivers import open_driver
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.testing.conformance.limits import LimitConformance, _jobs, _limit_queue
from tickwork.testing.factories import NOW, claim


class TestPostgresLimits(LimitConformance):
    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[PostgresStore]:
        s = PostgresStore(postgres_url)
        await s.migrate()
        yield s
        await s.close()


async def test_concurrent_claimers_never_exceed_max_running(postgres_url: str) -> None:
    stores = [PostgresStore(postgres_url) for _ in range(4)]
    try:
        await stores[0].migrate()
        await _jobs(stores[0], 40)
        await _limit_queue(stores[0], max_running=7)
        results = await asyncio.gather(*(
            claim(s, NOW, worker=f"w{i}", limit=10) for i, s in enumerate(stores)))
        assert sum(len(r.claims) for r in results) == 7
    finally:
        for s in stores:
            await s.close()


def test_the_driver_says_it_enforces_limits(postgres_url: str) -> None:
    assert open_driver(postgres_url).limits
