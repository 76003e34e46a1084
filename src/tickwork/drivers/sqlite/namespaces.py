"""Namespaces and their quotas on SQLite: a mixin of ``SqliteAdmin`` (the seam:
``drivers/namespaces.py``)."""

from __future__ import annotations

import sqlite3

from tickwork.drivers import namespaces as n
from tickwork.drivers.limits import hour_start
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.rows import to_us

Q = load_queries("tickwork.drivers.sqlite", "admin_queries")


class SqliteNamespaceMethods:
    _conn: Connection

    async def namespace_list(self, p: n.NamespaceListParams) -> list[n.NamespaceInfo]:
        def run(conn: sqlite3.Connection) -> list[n.NamespaceInfo]:
            rows = conn.execute(Q["namespace_list"], {
                "name": p.name, "since": to_us(p.hour_start),
                "hour": to_us(hour_start(p.hour_start)), "quotas_only": p.quotas_only})
            return [_namespace(r) for r in rows]

        return await self._conn.run(run)

    async def namespace_set(self, p: n.NamespaceSetParams) -> None:
        def run(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(Q["namespace_set"], {
                    "name": p.name, "max_jobs": p.quotas.max_jobs,
                    "max_runs_per_hour": p.quotas.max_runs_per_hour,
                    "max_payload_bytes": p.quotas.max_payload_bytes, "now": to_us(p.now)})
                if p.quotas.max_runs_per_hour is not None:
                    conn.execute(Q["namespace_runs_seed"], {
                        "name": p.name, "hour": to_us(hour_start(p.now))})

        await self._conn.run(run)

    async def secret_names(self, namespace: str) -> set[str]:
        def run(conn: sqlite3.Connection) -> set[str]:
            return {str(r["name"]) for r in conn.execute(Q["secret_names"], (namespace,))}

        return await self._conn.run(run)


def _namespace(row: sqlite3.Row) -> n.NamespaceInfo:
    return n.NamespaceInfo(
        name=row["name"], jobs=row["jobs"], runs_this_hour=row["runs"],
        quotas=n.Quotas(max_jobs=row["max_jobs"], max_runs_per_hour=row["max_runs_per_hour"],
                        max_payload_bytes=row["max_payload_bytes"]))
