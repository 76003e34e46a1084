"""The SQLite driver: the embedded deployment's source of truth, one process on one file."""

from __future__ import annotations

from functools import cached_property

from tickwork.drivers.sqlite.admin import SqliteAdmin
from tickwork.drivers.sqlite.secrets import SqliteSecretStore
from tickwork.drivers.sqlite.store import SqliteStore


class SqliteDriver:
    name = "sqlite"
    shared = False
    shards = False
    partitions = False
    listen = False
    limits = True

    def __init__(self, url: str) -> None:
        self.url = url
        self.store = SqliteStore(url)

    @cached_property
    def admin(self) -> SqliteAdmin:
        return self.store.admin()

    def secret_store(self) -> SqliteSecretStore:
        return SqliteSecretStore(self.url)

    async def migrate(self) -> None:
        await self.store.migrate()

    async def close(self) -> None:
        await self.store.close()
