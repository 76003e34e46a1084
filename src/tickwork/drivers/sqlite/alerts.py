"""Alerts on SQLite: a mixin of ``SqliteStore`` (the seam: ``drivers/alerts.py``)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from tickwork.drivers import alerts as a
from tickwork.drivers.rows import SpecCache
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.rows import from_us, from_us_or_none, job_from_row, to_us
from tickwork.models import Job

Q = load_queries("tickwork.drivers.sqlite")


def _delivery(row: sqlite3.Row, namespace: str = "default") -> a.AlertDelivery:
    return a.AlertDelivery(namespace=namespace,
        id=row["id"], alert_id=row["alert_id"], event=row["event"], channel=row["channel"],
        kind=row["kind"], payload=row["payload"], state=row["state"], attempts=row["attempts"],
        next_attempt_at=from_us(row["next_attempt_at"]), created_at=from_us(row["created_at"]),
        finished_at=from_us_or_none(row["finished_at"]), last_error=row["last_error"])


def _alert(conn: sqlite3.Connection, row: sqlite3.Row) -> a.StoredAlert:
    deliveries = tuple(_delivery(d) for d in conn.execute(Q["deliveries_of"], (row["id"],)))
    return a.StoredAlert(
        id=row["id"], job_id=row["job_id"], job_name=row["job_name"],
        condition=row["condition"], state=row["state"], detail=row["detail"],
        notified=bool(row["notified"]), fired_at=from_us(row["fired_at"]),
        updated_at=from_us(row["updated_at"]), resolved_at=from_us_or_none(row["resolved_at"]),
        deliveries=deliveries)


def _insert_deliveries(conn: sqlite3.Connection, alert_id: str, event: str,
                       deliveries: Sequence[a.NewDelivery], now: datetime) -> None:
    conn.executemany(Q["delivery_insert"], [
        (uuid.uuid4().hex, alert_id, event, d.channel, d.kind, d.payload, to_us(now),
         to_us(now)) for d in deliveries])


class SqliteAlertMethods:
    _conn: Connection
    _specs: SpecCache

    async def alert_fire(self, p: a.AlertFireParams) -> a.StoredAlert | None:
        def run(conn: sqlite3.Connection) -> a.StoredAlert | None:
            with write_transaction(conn):
                if conn.execute(Q["alert_firing_of"], (p.job_id, p.condition)).fetchone():
                    return None
                last = conn.execute(Q["alert_last_notified"],
                                    (p.job_id, p.condition)).fetchone()["fired_at"]
                quiet = last is not None and from_us(last) > p.now - timedelta(
                    seconds=p.cooldown_seconds)
                alert_id = uuid.uuid4().hex
                conn.execute(Q["alert_insert_firing"], {
                    "id": alert_id, "job_id": p.job_id, "job_name": p.job_name,
                    "condition": p.condition, "detail": p.detail, "notified": int(not quiet),
                    "now": to_us(p.now)})
                if not quiet:
                    _insert_deliveries(conn, alert_id, a.FIRING, p.deliveries, p.now)
                return _alert(conn, conn.execute(Q["alert_get"], (alert_id,)).fetchone())

        return await self._conn.run(run)

    async def alert_resolve(self, p: a.AlertResolveParams) -> a.StoredAlert | None:
        def run(conn: sqlite3.Connection) -> a.StoredAlert | None:
            with write_transaction(conn):
                row = conn.execute(Q["alert_firing_of"], (p.job_id, p.condition)).fetchone()
                if row is None:
                    return None
                conn.execute(Q["alert_resolve"], {"id": row["id"], "now": to_us(p.now),
                                                  "detail": p.detail})
                if row["notified"]:
                    _insert_deliveries(conn, row["id"], a.RESOLVED, p.deliveries, p.now)
                return _alert(conn, conn.execute(Q["alert_get"], (row["id"],)).fetchone())

        return await self._conn.run(run)

    async def alert_list(self, p: a.AlertListParams) -> list[a.StoredAlert]:
        def run(conn: sqlite3.Connection) -> list[a.StoredAlert]:
            before_at, before_id = (None, None) if p.before is None else (
                to_us(p.before[0]), p.before[1])
            rows = conn.execute(Q["alert_list"], {
                "job_id": p.job_id, "state": p.state, "before_at": before_at,
                "before_id": before_id, "limit": min(p.limit, a.MAX_ALERTS)}).fetchall()
            return [_alert(conn, r) for r in rows]

        return await self._conn.run(run)

    async def alert_facts(self, p: a.AlertFactsParams) -> a.AlertFacts:
        def run(conn: sqlite3.Connection) -> a.AlertFacts:
            recent = [(from_us(r["scheduled_at"]), r["state"]) for r in conn.execute(
                Q["facts_recent"], (p.job_id, max(p.recent, 1)))]
            success = conn.execute(Q["facts_last_success"], (p.job_id,)).fetchone()["at"]
            late = running = None
            if p.late_after is not None:
                late = conn.execute(Q["facts_late"], (p.job_id, to_us(
                    p.now - timedelta(seconds=p.late_after)))).fetchone()["at"]
            if p.running_longer_than is not None:
                running = conn.execute(Q["facts_running"], (p.job_id, to_us(
                    p.now - timedelta(seconds=p.running_longer_than)))).fetchone()["at"]
            failed = [] if p.ended_since is None else [
                (from_us(r["scheduled_at"]), r["state"]) for r in conn.execute(
                    Q["facts_failed_since"], (p.job_id, to_us(p.ended_since)))]
            return a.AlertFacts(recent=recent, failed_since=failed,
                                last_success_at=from_us_or_none(success),
                                late_since=from_us_or_none(late),
                                running_since=from_us_or_none(running))

        return await self._conn.run(run)

    async def alert_jobs(self, p: a.AlertJobsParams) -> list[Job]:
        def run(conn: sqlite3.Connection) -> list[Job]:
            rows = conn.execute(Q["alert_jobs_every" if p.every_job else "alert_jobs"],
                                (p.after_id, p.limit))
            return [job_from_row(r, self._specs) for r in rows]

        return await self._conn.run(run)

    async def delivery_claim(self, p: a.DeliveryClaimParams) -> list[a.AlertDelivery]:
        def run(conn: sqlite3.Connection) -> list[a.AlertDelivery]:
            with write_transaction(conn):
                rows = conn.execute(Q["delivery_due"], (to_us(p.now), p.limit)).fetchall()
                until = to_us(p.now + timedelta(seconds=p.lease_seconds))
                conn.executemany(Q["delivery_take"], [(until, r["id"]) for r in rows])
                taken = [conn.execute(Q["delivery_taken"], (r["id"],)).fetchone() for r in rows]
                return [_delivery(r, r["job_namespace"]) for r in taken]

        return await self._conn.run(run)

    async def delivery_finish(self, p: a.DeliveryFinishParams) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            final = p.retry_at is None
            state = a.PENDING if not final else a.DELIVERED if p.error is None else a.FAILED
            with write_transaction(conn):
                cur = conn.execute(Q["delivery_finish"], {
                    "state": state, "error": p.error, "id": p.id, "attempt": p.attempt,
                    "retry_at": None if p.retry_at is None else to_us(p.retry_at),
                    "finished_at": to_us(p.now) if final else None})
                return cur.rowcount == 1

        return await self._conn.run(run)
