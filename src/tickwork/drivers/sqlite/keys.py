"""The SQLite store's claims by key and its waiting list (for the Redis dispatch path).

A mixin of ``SqliteStore``: one write transaction (``BEGIN IMMEDIATE``, which is what makes
claims exclusive here), the same catch-up and overlap plan as ``occurrence_claim``, whose helpers
it shares (``claims.py``).
"""

from __future__ import annotations

import sqlite3

from tickwork.drivers import base as b
from tickwork.drivers.claiming import plan_claims
from tickwork.drivers.keyclaims import Key, KeyRow, left_waiting, triage, unique
from tickwork.drivers.rows import STATES
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.claims import SqliteClaimMethods
from tickwork.drivers.sqlite.connection import write_transaction
from tickwork.drivers.sqlite.rows import from_us, to_us

Q = load_queries("tickwork.drivers.sqlite")


class SqliteKeyMethods(SqliteClaimMethods):
    async def occurrence_claim_keys(self, p: b.OccurrenceClaimKeysParams) -> b.KeyClaimResult:
        keys = unique(p.keys)[:b.MAX_BATCH]

        def run(conn: sqlite3.Connection) -> b.KeyClaimResult:
            with write_transaction(conn):
                return self._claim_keys(conn, keys, p)

        return await self._conn.run(run)

    def _claim_keys(self, conn: sqlite3.Connection, keys: list[Key],
                    p: b.OccurrenceClaimKeysParams) -> b.KeyClaimResult:
        now = to_us(p.now)
        raw: dict[Key, sqlite3.Row] = {}
        for job_id, at in keys:
            row = conn.execute(Q["occurrence_for_key"], (job_id, to_us(at))).fetchone()
            if row is not None:
                raw[(job_id, at)] = row
        rows = {k: KeyRow(state=STATES[r["state"]], due_at=from_us(r["due_at"]),
                          priority=r["priority"], held=bool(r["job_paused"] or
                                                            r["queue_paused"]),
                          deleted=bool(r["job_deleted"]), due=r["due_at"] <= now)
                for k, r in raw.items()}
        sorted_keys = triage(keys, rows)
        candidates = [self._candidate(raw[k]) for k in sorted_keys.claimable]
        running, retrying = self._unfinished_of(conn, {c.job_id for c in candidates})
        plan = plan_claims(candidates, running, p.now, len(candidates), retrying)
        self._apply_marks(conn, plan, now)
        claims = [self._claim(conn, c, raw[(c.job_id, c.scheduled_at)], p, now)
                  for c in plan.claim]
        return b.KeyClaimResult(
            claims=claims, missed=len(plan.missed), skipped=len(plan.skipped),
            cancelled=plan.cancel_running,
            not_due=sorted_keys.not_due + left_waiting(sorted_keys.claimable, plan, rows),
            gone=sorted_keys.gone)

    async def occurrence_waiting(self, p: b.OccurrenceWaitingParams) -> list[
            b.WaitingOccurrence]:
        args = {"queue": p.queue, "after_job": p.after[0] if p.after else None,
                "after_at": to_us(p.after[1]) if p.after else None,
                "due_before": None if p.due_before is None else to_us(p.due_before),
                "limit": max(0, min(p.limit, b.MAX_BATCH))}

        def run(conn: sqlite3.Connection) -> list[b.WaitingOccurrence]:
            return [b.WaitingOccurrence(r["job_id"], from_us(r["scheduled_at"]),
                                        from_us(r["due_at"]), r["priority"])
                    for r in conn.execute(Q["occurrence_waiting"], args)]

        return await self._conn.run(run)
