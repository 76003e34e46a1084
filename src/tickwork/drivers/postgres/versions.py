"""Versioned changes to jobs: the last version applied to each job name, per namespace
(job_versions).

``take_version`` runs inside the caller's transaction, before its change: a version that is
not newer than the stored one raises StaleVersion, which rolls the whole change back. The
upsert's row lock orders two changes to one name that race.
"""

from __future__ import annotations

from datetime import datetime

from tickwork.drivers import base as b
from tickwork.drivers.namespaces import DEFAULT_NAMESPACE
from tickwork.drivers.postgres.connection import Conn, Pool, Q, fetch_one
from tickwork.errors import StaleVersion


async def take_version(conn: Conn, version: b.JobVersion | None, now: datetime) -> None:
    if version is None:
        return
    row = await fetch_one(conn, Q["job_version_take"],
                           (version.namespace, version.name, version.version, now))
    if row is None:
        stored = await fetch_one(conn, Q["job_version_get"], (version.namespace, version.name))
        raise StaleVersion(version.name, version.version, int(stored["version"]) if stored
                           else version.version)


class VersionMethods:
    pool: Pool

    async def job_version_get(self, name: str, namespace: str = DEFAULT_NAMESPACE) -> int | None:
        async with self.pool.transaction() as conn:
            row = await fetch_one(conn, Q["job_version_get"], (namespace, name))
        return None if row is None else int(row["version"])
