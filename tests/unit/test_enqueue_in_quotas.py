"""Creating a job inside the caller's own PostgreSQL transaction (``create_job_in``,
``enqueue_in``) meets the namespace's quotas as every other way of creating one does: the same
errors, the caller's transaction still usable after one, and the last place under ``max_jobs``
taken by one of two racing transactions only. Its secret references are checked in its
namespace."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from test_enqueue_client import _until_waiting_on_a_lock

from tickwork.client.enqueue import create_job_in, enqueue_in
from tickwork.drivers.base import JobListParams
from tickwork.drivers.namespaces import NamespaceSetParams, Quotas
from tickwork.drivers.postgres.secrets import PostgresSecretStore
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.errors import QuotaExceeded, ValidationError
from tickwork.testing.factories import NOW

HOOK = {"method": "POST", "url": "https://example.org/hook"}



def doc(name: str, **payload: Any) -> dict[str, Any]:
    return {"name": name, "kind": "http", "schedule": {"every": "1h"},
            "payload": {**HOOK, **payload}}


async def set_quotas(store: PostgresStore, namespace: str, **quotas: int) -> None:
    await store.admin().namespace_set(NamespaceSetParams(name=namespace, quotas=Quotas(**quotas),
                                                         now=NOW))


async def names_in(store: PostgresStore, namespace: str) -> list[str]:
    return [j.spec.name for j in await store.job_list(JobListParams(namespace=namespace))]


async def test_create_job_in_meets_the_namespace_quotas(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    await set_quotas(postgres_store, "acme", max_jobs=1, max_payload_bytes=200)
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        async with conn.transaction():
            await conn.execute("CREATE TEMP TABLE orders (id int)")
            with pytest.raises(QuotaExceeded) as big:
                await create_job_in(conn, doc("big", body={"x": "y" * 300}), now=NOW,
                                    namespace="acme")
            assert (big.value.quota, big.value.limit) == ("max_payload_bytes", 200)
            assert "refuses job 'big': its payload is" in str(big.value)
            made = await create_job_in(conn, doc("first"), now=NOW, namespace="acme")
            assert made.namespace == "acme"
            with pytest.raises(QuotaExceeded) as full:
                await create_job_in(conn, doc("second"), now=NOW, namespace="acme")
            assert (full.value.quota, full.value.used) == ("max_jobs", 1)
            assert str(full.value) == ("namespace 'acme': quota max_jobs (1) refuses more "
                                       "jobs: 1 defined, 1 more asked for")
            with pytest.raises(QuotaExceeded):
                await enqueue_in(conn, "http", HOOK, now=NOW, namespace="acme")
            await conn.execute("INSERT INTO orders VALUES (1)")  # still usable
        # Other namespaces keep their own quotas (none here).
        await create_job_in(conn, doc("second"), now=NOW)
        await conn.commit()
    assert await names_in(postgres_store, "acme") == ["first"]
    assert await names_in(postgres_store, "default") == ["second"]


async def test_two_transactions_cannot_both_take_the_last_place(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    await set_quotas(postgres_store, "acme", max_jobs=1)
    async with await psycopg.AsyncConnection.connect(postgres_url) as first, \
            await psycopg.AsyncConnection.connect(postgres_url) as second:
        await create_job_in(first, doc("one"), now=NOW, namespace="acme")
        racing = asyncio.create_task(create_job_in(second, doc("two"), now=NOW,
                                                   namespace="acme"))
        await _until_waiting_on_a_lock(postgres_url, second.info.backend_pid)
        assert not racing.done()
        await first.commit()
        with pytest.raises(QuotaExceeded, match="max_jobs"):
            await racing
        await second.rollback()
    assert await names_in(postgres_store, "acme") == ["one"]


async def test_create_job_in_checks_secrets_in_its_namespace(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    secrets = PostgresSecretStore(postgres_url)
    try:
        await secrets.secret_set("tok", b"ciphertext", NOW, namespace="globex")
    finally:
        await secrets.close()
    ref = {"Authorization": {"$secret": "tok"}}
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        with pytest.raises(ValidationError) as info:
            await create_job_in(conn, doc("hook", headers=ref), now=NOW, namespace="acme")
        assert info.value.field == "payload.headers.Authorization"
        assert "no secret 'tok' in namespace 'acme'" in str(info.value)
        assert "globex" not in str(info.value)
        await create_job_in(conn, doc("hook", headers=ref), now=NOW, namespace="globex")
        await conn.commit()
    assert await names_in(postgres_store, "globex") == ["hook"]
