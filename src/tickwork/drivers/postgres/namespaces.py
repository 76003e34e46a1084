"""Namespaces and their quotas on PostgreSQL: a mixin of ``PostgresAdmin`` (the seam:
``drivers/namespaces.py``); the answers are the SQLite driver's."""

from __future__ import annotations

from tickwork.drivers import namespaces as n
from tickwork.drivers.limits import hour_start
from tickwork.drivers.postgres.connection import Pool, Q, fetch_all
from tickwork.drivers.postgres.rows import Row


class PostgresNamespaceMethods:
    _pool: Pool

    async def namespace_list(self, p: n.NamespaceListParams) -> list[n.NamespaceInfo]:
        async with self._pool.transaction() as conn:
            rows = await fetch_all(conn, Q["namespace_list"], {
                "name": p.name, "since": p.hour_start, "hour": hour_start(p.hour_start),
                "quotas_only": p.quotas_only})
        return [_namespace(r) for r in rows]

    async def namespace_set(self, p: n.NamespaceSetParams) -> None:
        async with self._pool.transaction() as conn:
            await conn.execute(Q["namespace_set"], {
                "name": p.name, "max_jobs": p.quotas.max_jobs,
                "max_runs_per_hour": p.quotas.max_runs_per_hour,
                "max_payload_bytes": p.quotas.max_payload_bytes, "now": p.now})
            if p.quotas.max_runs_per_hour is not None:
                await conn.execute(Q["namespace_runs_seed"], {"name": p.name,
                                                              "hour": hour_start(p.now)})

    async def secret_names(self, namespace: str) -> set[str]:
        async with self._pool.transaction() as conn:
            rows = await fetch_all(conn, Q["secret_names"], (namespace,))
        return {str(r["name"]) for r in rows}


def _namespace(row: Row) -> n.NamespaceInfo:
    return n.NamespaceInfo(
        name=row["name"], jobs=row["jobs"], runs_this_hour=row["runs"],
        quotas=n.Quotas(max_jobs=row["max_jobs"], max_runs_per_hour=row["max_runs_per_hour"],
                        max_payload_bytes=row["max_payload_bytes"]))
