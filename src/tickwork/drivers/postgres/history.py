"""History in daily partitions: attempts by the day of ``scheduled_at``.

Why attempts only: an occurrence's primary key is its identity, and insert-if-absent on it is
what makes planning idempotent; the hot path finds waiting and running rows through partial
indexes that finished rows never enter. Finished occurrences are deleted in bounded batches.

Partitions wholly older than the retention are dropped. With a retention of a fraction of a day
(tests, benchmarks) the cutoff falls inside a partition kept, whose older attempts are deleted
in the same bounded batches: DELETEs, where whole days cost a DROP.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from psycopg import sql

from tickwork.drivers.history import HistoryPruned, HistoryPruneParams, PartitionsEnsureParams
from tickwork.drivers.postgres.connection import Pool, Q, fetch_all

PREFIX = "attempts_p"
# The tables tickwork's migrations create (a test holds it to the schema): the vacuumer's.
TABLES = ("alert_deliveries", "alerts", "api_tokens", "attempts", "audit_log", "calendars",
          "job_dedupe", "job_versions", "jobs", "limit_keys", "namespace_runs", "namespaces",
          "occurrences", "queues", "scheduler_nodes", "secrets", "shard_leases",
          "tickwork_meta", "tickwork_migrations")


@dataclass(frozen=True, slots=True)
class VacuumRules:
    """PostgreSQL's autovacuum thresholds: a table is vacuumed once its dead rows pass
    ``vacuum_base + vacuum_scale * live`` and analyzed once its changed rows pass
    ``analyze_base + analyze_scale * live``."""

    server_vacuums: bool
    vacuum_base: float = 50
    vacuum_scale: float = 0.2
    analyze_base: float = 50
    analyze_scale: float = 0.1

    @classmethod
    def of(cls, settings: dict[str, str]) -> VacuumRules:
        return cls(server_vacuums=settings.get("autovacuum", "on") == "on",
                   vacuum_base=float(settings.get("autovacuum_vacuum_threshold", 50)),
                   vacuum_scale=float(settings.get("autovacuum_vacuum_scale_factor", 0.2)),
                   analyze_base=float(settings.get("autovacuum_analyze_threshold", 50)),
                   analyze_scale=float(settings.get("autovacuum_analyze_scale_factor", 0.1)))

    def work(self, live: int, dead: int, changed: int) -> str:
        """``VACUUM (ANALYZE)``, ``ANALYZE`` or "" for a table with these counts."""
        if dead > self.vacuum_base + self.vacuum_scale * live:
            return "VACUUM (ANALYZE)"
        if changed > self.analyze_base + self.analyze_scale * live:
            return "ANALYZE"
        return ""


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
    _vacuum_rules: VacuumRules | None = None  # the server's settings, read once

    async def history_vacuum(self) -> list[str]:
        """With the server's autovacuum on (PostgreSQL's default) it reclaims dead rows and
        keeps the planner's statistics fresh; with it off nothing would: tables would grow for
        ever however much is pruned, and plans made while a table was small would stay as it
        grew. Then this does what autovacuum would, with the server's own thresholds: VACUUM
        (ANALYZE) each of tickwork's tables whose dead rows passed them, ANALYZE each whose
        changes did (autocommit: VACUUM runs outside a transaction). One scheduler at a time;
        the tables done, [] when none needed it or another scheduler is at it."""
        rules = self._vacuum_rules
        if rules is None:
            async with self.pool.statement() as conn:
                rows = await fetch_all(conn, Q["autovacuum_settings"])
            rules = self._vacuum_rules = VacuumRules.of({r["name"]: r["setting"] for r in rows})
        if rules.server_vacuums:
            return []
        done: list[str] = []
        async with self.pool.statement() as conn:
            if not (await fetch_all(conn, Q["vacuum_lock"]))[0]["locked"]:
                return []
            try:
                for row in await fetch_all(conn, Q["table_churn"], {"tables": list(TABLES)}):
                    work = rules.work(row["live"], row["dead"], row["changed"])
                    if work:
                        await conn.execute(sql.SQL(work + " {}").format(
                            sql.Identifier(row["name"])))
                        done.append(row["name"])
            finally:
                await conn.execute(Q["vacuum_unlock"])
        return done

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
