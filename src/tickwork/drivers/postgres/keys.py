"""The PostgreSQL store's claims by key and its waiting list (for the Redis dispatch path).

The same locking discipline as ``occurrence_claim`` (``claims.py``): the delivered rows are
locked ``FOR UPDATE SKIP LOCKED``, jobs whose overlap policy looks at what runs take a per-job
advisory try-lock, the running occurrences of those jobs are read afresh, and
``claiming.plan_claims`` decides. A key another claimer holds right now, or whose job lock is
taken, is ``not_due``: the caller re-arms it and looks again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tickwork.drivers import base as b
from tickwork.drivers.claiming import plan_claims
from tickwork.drivers.keyclaims import WAITING, Key, KeyRow, left_waiting, triage, unique
from tickwork.drivers.postgres.claims import ClaimMethods
from tickwork.drivers.postgres.connection import Conn, Q, fetch_all
from tickwork.drivers.postgres.rows import Row, instant
from tickwork.drivers.rows import STATES


def _key_args(keys: list[Key]) -> dict[str, Any]:
    return {"job_ids": [k[0] for k in keys], "scheduled": [k[1] for k in keys]}


class KeyClaimMethods(ClaimMethods):
    async def occurrence_claim_keys(self, p: b.OccurrenceClaimKeysParams) -> b.KeyClaimResult:
        keys = unique(p.keys)[:b.MAX_BATCH]
        if not keys:
            return b.KeyClaimResult(claims=[])
        async with self.pool.transaction() as conn:
            locked = await fetch_all(conn, Q["occurrence_keys_lock"], {
                **_key_args(keys), "server_clock": self.server_clock})
            locked = await self._with_job_locks(conn, locked)
            raw = {(r["job_id"], instant(r["scheduled_at"])): r for r in locked}
            rows = {k: _key_row(r, p.now) for k, r in raw.items()}
            busy = await self._busy_elsewhere(conn, [k for k in keys if k not in raw])
            sorted_keys = triage([k for k in keys if k not in busy], rows)
            candidates = [self._candidate(raw[k]) for k in sorted_keys.claimable]
            running, retrying = await self._unfinished_of(conn,
                                                          {c.job_id for c in candidates})
            plan = plan_claims(candidates, running, p.now, len(candidates), retrying)
            await self._apply_marks(conn, plan, p.now)
            claims = await self._apply_claims(conn, plan, list(raw.values()),
                                              b.OccurrenceClaimParams(
                queue="", worker=p.worker, limit=len(candidates), now=p.now,
                lease_seconds=p.lease_seconds, lease_margin_seconds=p.lease_margin_seconds))
        return b.KeyClaimResult(
            claims=claims, missed=len(plan.missed), skipped=len(plan.skipped),
            cancelled=plan.cancel_running,
            not_due=[*sorted_keys.not_due, *left_waiting(sorted_keys.claimable, plan, rows),
                     *((k[0], k[1], due) for k, due in busy.items())],
            gone=sorted_keys.gone)

    async def _busy_elsewhere(self, conn: Conn, keys: list[Key]) -> dict[Key, datetime]:
        """Of the keys not locked here: those still waiting (another claimer holds the row
        or the job's lock), with their due time. The others are gone or unknown."""
        if not keys:
            return {}
        rows = await fetch_all(conn, Q["occurrence_keys_peek"], _key_args(keys))
        return {(r["job_id"], instant(r["scheduled_at"])): instant(r["due_at"]) for r in rows
                if STATES[r["state"]] in WAITING}

    async def occurrence_waiting(self, p: b.OccurrenceWaitingParams) -> list[
            b.WaitingOccurrence]:
        async with self.pool.transaction() as conn:
            rows = await fetch_all(conn, Q["occurrence_waiting"], {
                "queue": p.queue, "after_job": p.after[0] if p.after else None,
                "after_at": p.after[1] if p.after else None, "due_before": p.due_before,
                "limit": max(0, min(p.limit, b.MAX_BATCH))})
        return [b.WaitingOccurrence(r["job_id"], instant(r["scheduled_at"]),
                                    instant(r["due_at"]), r["priority"]) for r in rows]


def _key_row(r: Row, now: datetime) -> KeyRow:
    due_at = instant(r["due_at"])
    return KeyRow(state=STATES[r["state"]], due_at=due_at, priority=r["priority"],
                  held=bool(r["job_paused"] or r["queue_paused"]),
                  deleted=bool(r["job_deleted"]), due=due_at <= now and bool(r["server_due"]))
