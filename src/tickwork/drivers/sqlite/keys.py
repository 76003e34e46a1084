"""The SQLite store's claims by key and its waiting list (for the Redis dispatch path).

A mixin of ``SqliteStore``: one write transaction (``BEGIN IMMEDIATE``, which is what makes
claims exclusive here), the same catch-up and overlap plan as ``occurrence_claim``.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from typing import TYPE_CHECKING

from tickwork.drivers import base as b
from tickwork.drivers.claiming import Candidate, ClaimPlan, plan_claims
from tickwork.drivers.keyclaims import Key, KeyRow, left_waiting, triage, unique
from tickwork.drivers.rows import STATES
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.rows import from_us, occurrence_from_row, to_us
from tickwork.models import Claim, Job, OccurrenceState

Q = load_queries("tickwork.drivers.sqlite")

_MARKS = (
    ("missed", OccurrenceState.MISSED, "past its catch-up window"),
    ("skipped", OccurrenceState.SKIPPED_OVERLAP, "an earlier run of the job was still running"),
    ("superseded", OccurrenceState.CANCELLED,
     "superseded by a newer run (overlap cancel_previous)"),
)


class SqliteKeyMethods:
    _conn: Connection

    if TYPE_CHECKING:  # provided by SqliteStore
        def _candidate(self, row: sqlite3.Row) -> Candidate: ...
        def _running_of(self, conn: sqlite3.Connection,
                        job_ids: set[str]) -> dict[str, list[b.LeaseRef]]: ...
        def _mark(self, conn: sqlite3.Connection, c: Candidate, state: OccurrenceState,
                  now: int, why: str) -> None: ...
        def _cancel_running(self, conn: sqlite3.Connection, ref: b.LeaseRef,
                            now: int) -> None: ...

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
        running = self._running_of(conn, {c.job_id for c in candidates})
        plan = plan_claims(candidates, running, p.now, len(candidates))
        self._apply_key_marks(conn, plan, now)
        claims = [self._claim_key(conn, c, raw[(c.job_id, c.scheduled_at)], p, now)
                  for c in plan.claim]
        return b.KeyClaimResult(
            claims=claims, missed=len(plan.missed), skipped=len(plan.skipped),
            cancelled=plan.cancel_running,
            not_due=sorted_keys.not_due + left_waiting(sorted_keys.claimable, plan, rows),
            gone=sorted_keys.gone)

    def _apply_key_marks(self, conn: sqlite3.Connection, plan: ClaimPlan, now: int) -> None:
        for attr, state, why in _MARKS:
            for c in getattr(plan, attr):
                self._mark(conn, c, state, now, why)
        for ref in plan.cancel_running:
            self._cancel_running(conn, ref, now)

    def _claim_key(self, conn: sqlite3.Connection, c: Candidate, row: sqlite3.Row,
                   p: b.OccurrenceClaimKeysParams, now: int) -> Claim:
        lease = max(p.lease_seconds, c.spec.timeout_seconds) + p.lease_margin_seconds
        lease_until = now + int(lease * 1_000_000)
        conn.execute(Q["occurrence_claim"], (lease_until, p.worker, now, c.job_id,
                                             row["scheduled_at"]))
        conn.execute(Q["attempt_insert"], (c.job_id, row["scheduled_at"], row["attempt"] + 1,
                                           p.worker, row["due_at"], now))
        job = Job(id=c.job_id, spec=c.spec,
                  next_run_at=None if row["job_next_run_at"] is None
                  else from_us(row["job_next_run_at"]),
                  created_at=from_us(row["job_created_at"]),
                  updated_at=from_us(row["job_updated_at"]), shard=row["job_shard"])
        occ = occurrence_from_row(row)
        occ = replace(occ, state=OccurrenceState.RUNNING, attempt=occ.attempt + 1,
                      lease_until=from_us(lease_until), worker=p.worker,
                      updated_at=from_us(now))
        return Claim(occurrence=occ, job=job)

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
