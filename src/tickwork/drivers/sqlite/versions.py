"""Versioned changes to jobs: the last version applied to each job name, per namespace
(job_versions).

``take_version`` runs inside the caller's write transaction, before its change: a version
that is not newer than the stored one raises StaleVersion, which rolls the whole change back.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from tickwork.drivers import base as b
from tickwork.drivers.namespaces import DEFAULT_NAMESPACE
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection
from tickwork.drivers.sqlite.rows import to_us
from tickwork.errors import StaleVersion

Q = load_queries("tickwork.drivers.sqlite")


def take_version(conn: sqlite3.Connection, version: b.JobVersion | None,
                 now: datetime) -> None:
    if version is None:
        return
    row = conn.execute(Q["job_version_take"],
                       (version.namespace, version.name, version.version, to_us(now))).fetchone()
    if row is None:
        stored = conn.execute(Q["job_version_get"],
                              (version.namespace, version.name)).fetchone()
        raise StaleVersion(version.name, version.version,
                           int(stored[0]) if stored else version.version)


class SqliteVersionMethods:
    _conn: Connection

    async def job_version_get(self, name: str, namespace: str = DEFAULT_NAMESPACE) -> int | None:
        def run(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(Q["job_version_get"], (namespace, name)).fetchone()
            return None if row is None else int(row[0])

        return await self._conn.run(run)
