"""The PostgreSQL driver: the postgres deployment's source of truth (psycopg 3, async)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from tickwork.drivers.postgres.admin import PostgresAdmin
from tickwork.drivers.postgres.secrets import PostgresSecretStore
from tickwork.drivers.postgres.store import PostgresStore


class PostgresDriver:
    name = "postgres"
    shared = True
    shards = True
    partitions = True
    listen = True
    limits = True

    def __init__(self, url: str, **store_options: Any) -> None:
        self.url = url
        self.store = PostgresStore(url, **store_options)

    @cached_property
    def admin(self) -> PostgresAdmin:
        return self.store.admin()

    def secret_store(self) -> PostgresSecretStore:
        return PostgresSecretStore(self.url)

    async def migrate(self) -> None:
        await self.store.migrate()

    async def close(self) -> None:
        await self.store.close()
