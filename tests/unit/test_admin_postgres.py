"""The AdminStore and SecretStore conformance suites against PostgreSQL, and what is particular
to PostgreSQL: the shared pool, wake-ups on resume, the secret store's URL and its errors."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest

from tickwork.drivers import open_driver
from tickwork.drivers.admin import QueueSetPausedParams
from tickwork.drivers.postgres.admin import PostgresAdmin
from tickwork.drivers.postgres.secrets import PostgresSecretStore
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.errors import StoreError, StoreUnavailable
from tickwork.secrets import resolver_for
from tickwork.testing import postgres as pg
from tickwork.testing.conformance.admin import AdminConformance
from tickwork.testing.conformance.secrets import SecretStoreConformance
from tickwork.testing.factories import NOW


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    s = PostgresStore(postgres_url)
    yield s
    await s.close()


class TestPostgresAdmin(AdminConformance):
    @pytest.fixture
    async def store(self, postgres_url: str) -> AsyncIterator[PostgresStore]:
        s = PostgresStore(postgres_url)
        await s.migrate()
        yield s
        await s.close()


class TestPostgresSecretStore(SecretStoreConformance):
    @pytest.fixture
    async def secret_store(self, postgres_url: str) -> AsyncIterator[PostgresSecretStore]:
        secrets = open_driver(postgres_url).secret_store()
        assert isinstance(secrets, PostgresSecretStore)
        yield secrets
        await secrets.close()


def test_admin_shares_the_store_pool(store: PostgresStore) -> None:
    admin = store.admin()
    assert isinstance(admin, PostgresAdmin)
    assert admin._pool is store.pool  # one bounded set of connections per process


async def test_resuming_a_queue_wakes_listening_workers(
        store: PostgresStore, postgres_url: str) -> None:
    admin = store.admin()
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as listen:
        await listen.execute("LISTEN tickwork_wake")
        await admin.queue_set_paused(QueueSetPausedParams(name="mail", paused=True, now=NOW))
        await admin.queue_set_paused(QueueSetPausedParams(name="mail", paused=False, now=NOW))
        payloads = [n.payload async for n in listen.notifies(timeout=5, stop_after=1)]
    assert payloads == ["mail"]  # the resume; pausing wakes no one


async def test_resolver_for_a_postgres_url(postgres_url: str) -> None:
    resolver = resolver_for(open_driver(postgres_url))
    assert resolver is not None
    assert isinstance(resolver.store, PostgresSecretStore)
    await resolver.store.close()  # never opened: nothing to release, and no error


async def test_secret_store_errors_name_the_fix() -> None:
    with pg.scratch_database() as url:  # not migrated: no secrets table
        secrets = PostgresSecretStore(url)
        try:
            with pytest.raises(StoreError, match="run `tickwork migrate` first"):
                await secrets.secret_list()
        finally:
            await secrets.close()
    gone = PostgresSecretStore(pg.url_of("tickwork_test_no_such_database"))
    with pytest.raises(StoreUnavailable):
        await gone.secret_get("x")
    await gone.close()
