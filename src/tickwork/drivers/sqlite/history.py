"""History retention on SQLite: finished runs, their attempts and old audit entries deleted in
bounded batches. One file has no partitions to create or drop."""

from __future__ import annotations

import sqlite3

from tickwork.drivers.history import HistoryPruned, HistoryPruneParams, PartitionsEnsureParams
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.rows import to_us

Q = load_queries("tickwork.drivers.sqlite")


def _changes(conn: sqlite3.Connection, query: str, rows: list[tuple[str, int]]) -> int:
    """Rows ``executemany`` changed (its ``rowcount`` is not summed for every statement)."""
    before = conn.total_changes
    conn.executemany(query, rows)
    return conn.total_changes - before


class SqliteHistoryMethods:
    _conn: Connection

    async def history_partitions_ensure(self, p: PartitionsEnsureParams) -> list[str]:
        return []

    async def history_vacuum(self) -> list[str]:
        return []  # SQLite reuses the pages a DELETE frees (its freelist) by itself

    async def history_prune(self, p: HistoryPruneParams) -> HistoryPruned:
        before = to_us(p.before)

        def run(conn: sqlite3.Connection) -> HistoryPruned:
            with write_transaction(conn):
                keys = conn.execute(Q["occurrences_old_finished"],
                                    (before, before, p.limit)).fetchall()
                keys = [(r[0], r[1]) for r in keys]
                attempts = _changes(conn, Q["attempts_of_run_delete"], keys)
                occurrences = _changes(conn, Q["occurrence_delete"], keys)
                conn.execute(Q["namespace_runs_prune"], (before,))
                audit = 0 if p.audit_before is None else conn.execute(
                    Q["audit_prune"], (to_us(p.audit_before), p.limit)).rowcount
            return HistoryPruned(occurrences_deleted=occurrences, attempts_deleted=attempts,
                                 audit_deleted=max(audit, 0))

        return await self._conn.run(run)
