"""Alerts on PostgreSQL: a mixin of ``PostgresStore`` (the seam: ``drivers/alerts.py``).

Firing is one ``INSERT ... ON CONFLICT DO NOTHING`` against the unique index on firing alerts,
so schedulers racing on one job record one alert and write its deliveries once; deliveries
are claimed with ``FOR UPDATE SKIP LOCKED`` and a lease, so each attempt is made by one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from tickwork.drivers import alerts as a
from tickwork.drivers.postgres.connection import Conn, Pool, Q, fetch_all, fetch_one
from tickwork.drivers.postgres.rows import instant, instant_or_none, job_from_row
from tickwork.drivers.rows import SpecCache
from tickwork.models import Job

FAR_PAST = datetime.fromisoformat("1970-01-01T00:00:00+00:00")
FAR_FUTURE = datetime.fromisoformat("9999-01-01T00:00:00+00:00")


def _pairs(text: str) -> list[tuple[datetime, str]]:
    """``[[at, state], ...]`` as JSON text, with its instants read back."""
    return [(instant(datetime.fromisoformat(at)), state) for at, state in json.loads(text)]


def _delivery(row: Any, namespace: str = "default") -> a.AlertDelivery:
    return a.AlertDelivery(namespace=namespace,
        id=row["id"], alert_id=row["alert_id"], event=row["event"], channel=row["channel"],
        kind=row["kind"], payload=row["payload"], state=row["state"], attempts=row["attempts"],
        next_attempt_at=instant(row["next_attempt_at"]), created_at=instant(row["created_at"]),
        finished_at=instant_or_none(row["finished_at"]), last_error=row["last_error"])


async def _alerts(conn: Conn, rows: Sequence[Any]) -> list[a.StoredAlert]:
    found: dict[str, list[a.AlertDelivery]] = {r["id"]: [] for r in rows}
    if found:
        for d in await fetch_all(conn, Q["deliveries_of"], (list(found),)):
            found[d["alert_id"]].append(_delivery(d))
    return [a.StoredAlert(
        id=r["id"], job_id=r["job_id"], job_name=r["job_name"], condition=r["condition"],
        state=r["state"], detail=r["detail"], notified=r["notified"],
        fired_at=instant(r["fired_at"]), updated_at=instant(r["updated_at"]),
        resolved_at=instant_or_none(r["resolved_at"]), deliveries=tuple(found[r["id"]]))
        for r in rows]


async def _insert_deliveries(conn: Conn, alert_id: str, event: str,
                             deliveries: Sequence[a.NewDelivery], now: datetime) -> None:
    if not deliveries:
        return
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO alert_deliveries (id, alert_id, event, channel, kind, payload, state, "
            "attempts, next_attempt_at, created_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, 'pending', 0, %s, %s)",
            [(uuid.uuid4().hex, alert_id, event, d.channel, d.kind, d.payload, now, now)
             for d in deliveries])


class AlertMethods:
    pool: Pool
    _specs: SpecCache

    async def alert_fire(self, p: a.AlertFireParams) -> a.StoredAlert | None:
        async with self.pool.transaction() as conn:
            row = await fetch_one(conn, Q["alert_insert_firing"], {
                "id": uuid.uuid4().hex, "job_id": p.job_id, "job_name": p.job_name,
                "condition": p.condition, "detail": p.detail, "now": p.now,
                "quiet_after": p.now - timedelta(seconds=p.cooldown_seconds)})
            if row is None:
                return None
            if row["notified"]:
                await _insert_deliveries(conn, row["id"], a.FIRING, p.deliveries, p.now)
            return (await _alerts(conn, [row]))[0]

    async def alert_resolve(self, p: a.AlertResolveParams) -> a.StoredAlert | None:
        async with self.pool.transaction() as conn:
            row = await fetch_one(conn, Q["alert_resolve"], {
                "job_id": p.job_id, "condition": p.condition, "now": p.now,
                "detail": p.detail})
            if row is None:
                return None
            if row["notified"]:
                await _insert_deliveries(conn, row["id"], a.RESOLVED, p.deliveries, p.now)
            return (await _alerts(conn, [row]))[0]

    async def alert_list(self, p: a.AlertListParams) -> list[a.StoredAlert]:
        before_at, before_id = (None, None) if p.before is None else p.before
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["alert_list"], {
                "job_id": p.job_id, "state": p.state, "before_at": before_at,
                "before_id": before_id, "limit": min(p.limit, a.MAX_ALERTS)})
            return await _alerts(conn, rows)

    async def alert_facts(self, p: a.AlertFactsParams) -> a.AlertFacts:
        late = None if p.late_after is None else p.now - timedelta(seconds=p.late_after)
        running = None if p.running_longer_than is None else p.now - timedelta(
            seconds=p.running_longer_than)
        async with self.pool.transaction() as conn:
            row = await fetch_one(conn, Q["alert_facts"], {
                "job_id": p.job_id, "recent": max(p.recent, 1),
                "late_before": late or FAR_PAST, "running_before": running or FAR_PAST,
                "ended_since": p.ended_since or FAR_FUTURE})
        assert row is not None  # one row, always
        return a.AlertFacts(
            recent=_pairs(row["recent"]), failed_since=_pairs(row["failed_since"]),
            last_success_at=instant_or_none(row["last_success_at"]),
            late_since=None if late is None else instant_or_none(row["late_since"]),
            running_since=None if running is None else instant_or_none(row["running_since"]))

    async def alert_jobs(self, p: a.AlertJobsParams) -> list[Job]:
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["alert_jobs_every" if p.every_job else "alert_jobs"], {
                "after": p.after_id, "limit": p.limit,
                "shards": None if p.shards is None else sorted(p.shards)})
        return [job_from_row(r, self._specs) for r in rows]

    async def delivery_claim(self, p: a.DeliveryClaimParams) -> list[a.AlertDelivery]:
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["delivery_claim"], {
                "now": p.now, "limit": p.limit,
                "until": p.now + timedelta(seconds=p.lease_seconds)})
        return sorted((_delivery(r, r["job_namespace"]) for r in rows),
                      key=lambda d: (d.created_at, d.alert_id, d.event, d.channel))

    async def delivery_finish(self, p: a.DeliveryFinishParams) -> bool:
        final = p.retry_at is None
        state = a.PENDING if not final else a.DELIVERED if p.error is None else a.FAILED
        async with self.pool.transaction() as conn:
            cur = await conn.execute(Q["delivery_finish"], {
                "state": state, "error": p.error, "id": p.id, "attempt": p.attempt,
                "retry_at": p.retry_at, "finished_at": p.now if final else None})
            return cur.rowcount == 1
