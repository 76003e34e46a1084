"""Claims: due occurrences of one queue, decided and taken in one write transaction.

A mixin of ``SqliteStore``. ``BEGIN IMMEDIATE`` takes the write lock up front, which is what
makes claims exclusive here: read the candidates and the running occurrences of their jobs, let
``claiming.plan_claims`` decide, and apply its plan row by row.

Claims by key and the waiting list (for the Redis dispatch path) are here too, in
``SqliteKeyMethods``: the same transaction and the same plan.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import replace

from tickwork.drivers import base as b
from tickwork.drivers.claiming import (
    Candidate,
    ClaimPlan,
    Key,
    KeyRow,
    Margins,
    fresh_query,
    fresh_share,
    held_by_limits,
    left_waiting,
    plan_claims,
    recheck_at,
    triage,
    unique,
)
from tickwork.drivers.limits import hour_start
from tickwork.drivers.rows import STATES, TRIGGERS, SpecCache
from tickwork.drivers.sqlfiles import load_queries
from tickwork.drivers.sqlite.connection import Connection, write_transaction
from tickwork.drivers.sqlite.limits import limits_read, limits_write
from tickwork.drivers.sqlite.rows import from_us, from_us_or_none, occurrence_from_row, to_us
from tickwork.models import AttemptOutcome, Claim, Job, OccurrenceState, Overlap

Q = load_queries("tickwork.drivers.sqlite")
ORDER_OLDEST = "ORDER BY o.priority DESC, o.due_at\n"
FRESH_ORDER = "AND o.priority = :top AND o.due_at > :after\nORDER BY o.due_at DESC\n"
_FRESH_CANDIDATES = fresh_query(Q["occurrence_candidates"], ORDER_OLDEST, FRESH_ORDER)

_MARKS = (
    ("missed", OccurrenceState.MISSED, "past its catch-up window"),
    ("skipped", OccurrenceState.SKIPPED_OVERLAP,
     "an earlier run of the job was still running or waiting to retry"),
    ("superseded", OccurrenceState.CANCELLED,
     "superseded by a newer run (overlap cancel_previous)"),
)


class SqliteClaimMethods:
    _conn: Connection
    _specs: SpecCache
    _margins: Margins

    async def occurrence_claim(self, p: b.OccurrenceClaimParams) -> b.ClaimResult:
        def run(conn: sqlite3.Connection) -> b.ClaimResult:
            now = to_us(p.now)
            with write_transaction(conn):
                args = {"queue": p.queue, "now": now,
                        "limit": self._margins.candidates(p.queue, p.limit),
                        "hour": to_us(hour_start(p.now))}
                rows = conn.execute(Q["occurrence_candidates"], args).fetchall()
                if not rows:
                    return b.ClaimResult(claims=[])
                share = fresh_share(p.limit)
                if share and len(rows) >= p.limit:  # a backlog: the newest due have their share
                    rows = [*conn.execute(_FRESH_CANDIDATES, {
                        **args, "limit": share, "top": rows[0]["priority"],
                        "after": max(r["due_at"] for r in rows)}).fetchall(), *rows]
                by_key = {(r["job_id"], r["scheduled_at"]): r for r in rows}
                candidates = [self._candidate(r) for r in rows]
                limits, budget = limits_read(conn, candidates, p.now)
                running, retrying = self._unfinished_of(conn, {c.job_id for c in candidates})
                plan = plan_claims(candidates, running, p.now, p.limit, retrying, budget=budget)
                self._margins.note(p.queue, plan)
                self._apply_marks(conn, plan, now)
                claims = [self._claim(conn, c, by_key[(c.job_id, to_us(c.scheduled_at))], p, now)
                          for c in plan.claim]
                limits_write(conn, plan, limits, budget, p.now)
            return b.ClaimResult(claims=claims, missed=len(plan.missed),
                                 skipped=len(plan.skipped), cancelled=plan.cancel_running,
                                 held=len(plan.held), recheck_at=recheck_at(plan, budget, p.now))

        return await self._conn.run(run)

    # -- helpers (on the connection's thread; the key claims use them too) ------------------

    def _candidate(self, row: sqlite3.Row) -> Candidate:
        return Candidate(
            job_id=row["job_id"], scheduled_at=from_us(row["scheduled_at"]),
            state=STATES[row["state"]], attempt=row["attempt"],
            trigger=TRIGGERS[row["trigger"]],
            spec=self._specs.get(row["job_id"], row["job_version"], row["job_spec"]),
            overlap=Overlap(row["overlap"]) if row["overlap"] else None,
            queue=row["queue"], limited_at=from_us_or_none(row["limited_at"]),
            namespace=row["job_namespace"],
        )

    def _unfinished_of(
        self, conn: sqlite3.Connection, job_ids: set[str]
    ) -> tuple[dict[str, list[b.LeaseRef]], set[str]]:
        """The running attempts of these jobs, and those of them with a run waiting to retry."""
        running: dict[str, list[b.LeaseRef]] = defaultdict(list)
        retrying: set[str] = set()
        for job_id in job_ids:
            for r in conn.execute(Q["occurrence_unfinished_of_job"], {"job_id": job_id}):
                if r["state"] == OccurrenceState.RUNNING.value:
                    running[job_id].append(
                        b.LeaseRef(r["job_id"], from_us(r["scheduled_at"]), r["attempt"]))
                else:
                    retrying.add(job_id)
        return running, retrying

    def _apply_marks(self, conn: sqlite3.Connection, plan: ClaimPlan, now: int) -> None:
        for attr, state, why in _MARKS:
            for c in getattr(plan, attr):
                self._mark(conn, c, state, now, why)
        for ref in plan.cancel_running:
            self._cancel_running(conn, ref, now)

    def _mark(self, conn: sqlite3.Connection, c: Candidate, state: OccurrenceState, now: int,
              why: str) -> None:
        conn.execute(Q["occurrence_mark"], (
            state.value, now, now, why, c.job_id, to_us(c.scheduled_at)))

    def _cancel_running(self, conn: sqlite3.Connection, ref: b.LeaseRef, now: int) -> None:
        why = "cancelled: a newer run started (overlap cancel_previous)"
        key = (ref.job_id, to_us(ref.scheduled_at))
        conn.execute(
            "UPDATE occurrences SET state = 'cancelled', finished_at = ?, updated_at = ?, "
            "lease_until = NULL, last_error = ? "
            "WHERE job_id = ? AND scheduled_at = ? AND attempt = ? AND state = 'running'",
            (now, now, why, *key, ref.attempt))
        conn.execute(Q["attempt_finish"], (
            None, now, AttemptOutcome.FAILED.value, None, why, *key, ref.attempt))

    def _claim(self, conn: sqlite3.Connection, c: Candidate, row: sqlite3.Row,
               p: b.OccurrenceClaimParams | b.OccurrenceClaimKeysParams, now: int) -> Claim:
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
                  updated_at=from_us(row["job_updated_at"]), shard=row["job_shard"],
                  namespace=row["job_namespace"])
        occ = occurrence_from_row(row)
        occ = replace(occ, state=OccurrenceState.RUNNING, attempt=occ.attempt + 1,
                      lease_until=from_us(lease_until), worker=p.worker,
                      updated_at=from_us(now))
        return Claim(occurrence=occ, job=job, limited_at=from_us_or_none(row["limited_at"]))


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
        limits, budget = limits_read(conn, candidates, p.now)
        running, retrying = self._unfinished_of(conn, {c.job_id for c in candidates})
        plan = plan_claims(candidates, running, p.now, len(candidates), retrying, budget=budget)
        self._apply_marks(conn, plan, now)
        claims = [self._claim(conn, c, raw[(c.job_id, c.scheduled_at)], p, now)
                  for c in plan.claim]
        limits_write(conn, plan, limits, budget, p.now)
        return b.KeyClaimResult(
            claims=claims, missed=len(plan.missed), skipped=len(plan.skipped),
            cancelled=plan.cancel_running, held=len(plan.held),
            not_due=[*sorted_keys.not_due, *left_waiting(sorted_keys.claimable, plan, rows),
                     *held_by_limits(plan, budget, p.now)],
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
