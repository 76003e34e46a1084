"""History in daily partitions: attempts by the day of ``scheduled_at``.

Why attempts only: an occurrence's primary key is its identity, and insert-if-absent on it is
what makes planning idempotent; the hot path finds waiting and running rows through partial
indexes that finished rows never enter. Finished occurrences are deleted in bounded batches.

Partitions wholly older than the retention are dropped. With a retention of a fraction of a day
(tests, benchmarks) the cutoff falls inside a partition kept, whose older attempts are deleted
in the same bounded batches: DELETEs, where whole days cost a DROP.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from psycopg import sql

from tickwork.drivers.history import HistoryPruned, HistoryPruneParams, PartitionsEnsureParams
from tickwork.drivers.postgres.connection import Pool, Q, fetch_all

PREFIX = "attempts_p"
PRUNED_TABLES = ("jobs", "occurrences", "attempts")  # what pruning and purging delete from


def partition_name(day: date) -> str:
    return f"{PREFIX}{day:%Y%m%d}"


def partition_day(name: str) -> date | None:
    try:
        return datetime.strptime(name.removeprefix(PREFIX), "%Y%m%d").date()
    except ValueError:
        return None


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def _ddl(name: str, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(Q[name]).format(**parts)


class HistoryMethods:
    pool: Pool
    _autovacuum: bool | None = None  # the server's setting, read once

    async def history_vacuum(self) -> list[str]:
        """With the server's autovacuum on (PostgreSQL's default) it reclaims what pruning
        deleted; with it off nothing would, and the tables would grow for ever however much
        is pruned: then VACUUM (ANALYZE) them here (autocommit: VACUUM runs outside a
        transaction; on the partitioned attempts table it vacuums every partition)."""
        if self._autovacuum is None:
            async with self.pool.statement() as conn:
                rows = await fetch_all(conn, Q["autovacuum_setting"])
            self._autovacuum = rows[0]["setting"] == "on"
        if self._autovacuum:
            return []
        async with self.pool.statement() as conn:
            await conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(
                sql.SQL(", ").join(sql.Identifier(t) for t in PRUNED_TABLES)))
        return list(PRUNED_TABLES)

    async def history_partitions(self) -> list[str]:
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["partition_list"])
        return sorted(r["name"] for r in rows)

    async def history_partitions_ensure(self, p: PartitionsEnsureParams) -> list[str]:
        today = p.now.astimezone(UTC).date()
        wanted = [today + timedelta(days=n) for n in range(p.days_ahead + 1)]
        created: list[str] = []
        async with self.pool.transaction() as conn:
            await conn.execute(Q["partition_lock"])
            existing = {r["name"] for r in await fetch_all(conn, Q["partition_list"])}
            for day in wanted:
                name = partition_name(day)
                if name in existing:
                    continue
                await conn.execute(_ddl(
                    "partition_create", part=sql.Identifier(name),
                    lo=sql.Literal(_midnight(day)),
                    hi=sql.Literal(_midnight(day + timedelta(days=1)))))
                created.append(name)
        return created

    async def history_prune(self, p: HistoryPruneParams) -> HistoryPruned:
        args = {"before": p.before, "limit": p.limit}
        dropped: list[str] = []
        straddled: list[str] = []  # kept, but begun before the cutoff
        async with self.pool.transaction() as conn:
            await conn.execute(Q["partition_lock"])
            for r in await fetch_all(conn, Q["partition_list"]):
                day = partition_day(r["name"])
                if day is not None and _midnight(day + timedelta(days=1)) <= p.before:
                    await conn.execute(_ddl("partition_drop", part=sql.Identifier(r["name"])))
                    dropped.append(r["name"])
                elif p.within_partitions and day is not None and _midnight(day) < p.before:
                    straddled.append(r["name"])
            attempts = (await conn.execute(Q["attempts_default_prune"], args)).rowcount
            for name in sorted(straddled):
                if attempts >= p.limit:
                    break
                attempts += (await conn.execute(
                    _ddl("attempts_partition_prune", part=sql.Identifier(name)),
                    {**args, "limit": p.limit - attempts})).rowcount
            occurrences = (await conn.execute(Q["occurrences_prune"], args)).rowcount
            await conn.execute(Q["namespace_runs_prune"], {"before": p.before})
            audit = 0 if p.audit_before is None else (await conn.execute(
                Q["audit_prune"], {"before": p.audit_before, "limit": p.limit})).rowcount
        return HistoryPruned(partitions_dropped=sorted(dropped),
                             occurrences_deleted=occurrences, attempts_deleted=attempts,
                             audit_deleted=audit)
