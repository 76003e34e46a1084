"""Claims: due occurrences of one queue, taken with ``FOR UPDATE SKIP LOCKED`` in batches.

One transaction: lock the candidates (rows other claimers hold are skipped), take an advisory
lock per job whose overlap policy looks at what runs (try-locks, so claimers never wait or
deadlock; a job another claimer is deciding waits for the next claim), read the running
occurrences of those jobs afresh, let ``claiming.plan_claims`` decide, and apply its plan with
one statement per kind of change. Two workers can never both start a ``skip`` job.

Claims by key and the waiting list (for the Redis dispatch path) are here too, in
``KeyClaimMethods``: the delivered rows are locked ``FOR UPDATE SKIP LOCKED``, the same
per-job advisory try-lock is taken, and a key another claimer holds right now, or whose job
lock is taken, is ``not_due``: the caller re-arms it and looks again.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from tickwork.clock import delta
from tickwork.drivers import base as b
from tickwork.drivers.claiming import (
    WAITING,
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
from tickwork.drivers.limits import Budget, LimitState, hour_start
from tickwork.drivers.postgres.connection import Conn, Pool, Q, fetch_all, fetch_tuples
from tickwork.drivers.postgres.limits import (
    limits_note_held,
    limits_read,
    limits_write,
    meets_limits,
    meets_quotas,
)
from tickwork.drivers.postgres.rows import (
    Row,
    instant,
    instant_or_none,
    occurrence_claimed,
)
from tickwork.drivers.rows import STATES, TRIGGERS, SpecCache
from tickwork.frozen import direct
from tickwork.models import Claim, Job, JobSpec, OccurrenceState, Overlap

_MARKS = (
    ("missed", OccurrenceState.MISSED, "past its catch-up window"),
    ("skipped", OccurrenceState.SKIPPED_OVERLAP,
     "an earlier run of the job was still running or waiting to retry"),
    ("superseded", OccurrenceState.CANCELLED,
     "superseded by a newer run (overlap cancel_previous)"),
)
_ALLOW_ALL = Overlap.ALLOW_ALL.value  # an enum's .value is a Python property: read once
_CANCEL_PREVIOUS_WHY = "cancelled: a newer run started (overlap cancel_previous)"
ORDER_OLDEST = "ORDER BY o.priority DESC, o.due_at\n"
FRESH_ORDER = "AND o.priority = %(top)s AND o.due_at > %(after)s\nORDER BY o.due_at DESC\n"
_FRESH_CANDIDATES = fresh_query(Q["occurrence_candidates"], ORDER_OLDEST, FRESH_ORDER)
# Built once per row read or run claimed: without a class call's keyword dict.
_new_candidate, _new_key_row = direct(Candidate), direct(KeyRow)
_new_job, _new_claim = direct(Job), direct(Claim)


class ClaimMethods:
    pool: Pool
    _specs: SpecCache
    _margins: Margins
    server_clock: bool

    async def occurrence_claim(self, p: b.OccurrenceClaimParams) -> b.ClaimResult:
        async with self.pool.transaction() as conn:
            args = {"queue": p.queue, "now": p.now, "server_clock": self.server_clock,
                    "limit": self._margins.candidates(p.queue, p.limit),
                    "hour": hour_start(p.now)}
            rows = await fetch_all(conn, Q["occurrence_candidates"], args, binary=True)
            if not rows:
                return b.ClaimResult(claims=[])
            share = fresh_share(p.limit)
            if share and len(rows) >= p.limit:  # a backlog: the newest due have their share
                rows = [*await fetch_all(conn, _FRESH_CANDIDATES, {
                    **args, "limit": share, "top": rows[0]["priority"],
                    "after": max(r["due_at"] for r in rows)}, binary=True), *rows]
            rows = await self._with_job_locks(conn, rows)
            candidates = [self._candidate(r) for r in rows]
            limits, budget = await self._limits(conn, candidates, rows, p.now)
            running, retrying = await self._unfinished_of(conn, {c.job_id for c in candidates})
            plan = plan_claims(candidates, running, p.now, p.limit, retrying, budget=budget)
            self._margins.note(p.queue, plan)
            await self._apply_marks(conn, plan, p.now)
            claims = await self._apply_claims(conn, plan, _rows_of(candidates, rows), p)
            await self._apply_limits(conn, plan, limits, budget, p.now)
        return b.ClaimResult(claims=claims, missed=len(plan.missed), skipped=len(plan.skipped),
                             cancelled=plan.cancel_running, held=len(plan.held),
                             recheck_at=recheck_at(plan, budget, p.now))

    async def _with_job_locks(self, conn: Conn, rows: list[Row]) -> list[Row]:
        """The candidates whose job this claimer may decide for now."""
        # By the occurrence's own policy (claim_overlap: a backfill's choice, else its job's):
        # an allow_all claim looks at nothing, and one that races a locked decision for the
        # same job is as if it came right after it, which allow_all permits.
        # An allow_all job with a max_concurrency counts its running attempts: locked too.
        guarded = sorted({r["job_id"] for r in rows
                          if r["claim_overlap"] != _ALLOW_ALL
                          or self._spec(r).max_concurrency is not None})
        if not guarded:
            return rows
        locked = {r[0] for r in await fetch_tuples(conn, Q["job_overlap_locks"], (guarded,))}
        return [r for r in rows if r["job_id"] in locked or (
            r["claim_overlap"] == _ALLOW_ALL
            and self._spec(r).max_concurrency is None)]

    def _spec(self, row: Row) -> JobSpec:
        return self._specs.get(row["job_id"], row["job_version"], row["job_spec"])

    def _candidate(self, row: Row) -> Candidate:
        return _new_candidate(
            job_id=row["job_id"], scheduled_at=instant(row["scheduled_at"]),
            state=STATES[row["state"]], attempt=row["attempt"],
            trigger=TRIGGERS[row["trigger"]], spec=self._spec(row),
            overlap=Overlap(row["overlap"]) if row["overlap"] else None,
            queue=row["queue"], limited_at=instant_or_none(row["limited_at"]),
            namespace=row["job_namespace"])

    async def _limits(self, conn: Conn, candidates: list[Candidate], rows: list[Row],
                      now: datetime) -> tuple[list[LimitState], Budget | None]:
        if not meets_limits(candidates, rows):
            return [], None
        return await limits_read(conn, candidates, now, meets_quotas(rows))

    async def _apply_limits(self, conn: Conn, plan: ClaimPlan, limits: list[LimitState],
                            budget: Budget | None, now: datetime) -> None:
        if budget is not None:
            await limits_write(conn, plan, limits, budget, now)
        elif plan.held:  # a job's max_concurrency held them
            await limits_note_held(conn, plan, now)

    async def _unfinished_of(self, conn: Conn, job_ids: set[str]
                             ) -> tuple[dict[str, list[b.LeaseRef]], set[str]]:
        """The running attempts of these jobs, and those of them with a run waiting to retry."""
        running: dict[str, list[b.LeaseRef]] = defaultdict(list)
        retrying: set[str] = set()
        for r in await fetch_all(conn, Q["occurrence_unfinished_of_jobs"],
                                 {"job_ids": sorted(job_ids)}):
            if r["state"] == OccurrenceState.RUNNING.value:
                running[r["job_id"]].append(
                    b.LeaseRef(r["job_id"], instant(r["scheduled_at"]), r["attempt"]))
            else:
                retrying.add(r["job_id"])
        return running, retrying

    async def _apply_marks(self, conn: Conn, plan: ClaimPlan, now: datetime) -> None:
        marks = [(c, state, why) for attr, state, why in _MARKS for c in getattr(plan, attr)]
        if marks:
            await conn.execute(Q["occurrence_mark"], {
                "now": now,
                "job_ids": [c.job_id for c, _, _ in marks],
                "scheduled": [c.scheduled_at for c, _, _ in marks],
                "states": [state.value for _, state, _ in marks],
                "whys": [why for _, _, why in marks],
            })
        if plan.cancel_running:
            refs = plan.cancel_running
            await conn.execute(Q["occurrence_cancel_running"], {
                "now": now, "why": _CANCEL_PREVIOUS_WHY,
                "job_ids": [r.job_id for r in refs], "scheduled": [r.scheduled_at for r in refs],
                "attempts": [r.attempt for r in refs]})

    async def _apply_claims(self, conn: Conn, plan: ClaimPlan, rows_of: dict[int, Row],
                            p: b.OccurrenceClaimParams) -> list[Claim]:
        """Claims the plan's candidates; ``rows_of`` maps each candidate (its id) to its row."""
        if not plan.claim:
            return []
        spans = {t: delta(max(p.lease_seconds, t) + p.lease_margin_seconds)
                 for t in {c.spec.timeout_seconds for c in plan.claim}}  # a job's few timeouts
        leases = [p.now + spans[c.spec.timeout_seconds] for c in plan.claim]
        # Planned for this claim (prepare=False): a generic plan made while the table was
        # small (a seq scan and a hash join) would read every row of it once it is not.
        cur = await conn.execute(Q["occurrence_claim"], {
            "now": p.now, "worker": p.worker,
            "tids": [rows_of[id(c)]["tid"] for c in plan.claim],
            "leases": leases}, prepare=False)
        # Every planned row is locked by this transaction, so each is claimed; checked anyway
        # (by the count: the keys are read only if one is missing).
        done = None if cur.rowcount == len(plan.claim) else {
            (r["job_id"], instant(r["scheduled_at"])) for r in await cur.fetchall()}
        claims: list[Claim] = []
        for c, lease_until in zip(plan.claim, leases, strict=True):
            if done is not None and (c.job_id, c.scheduled_at) not in done:
                continue
            source = rows_of[id(c)]
            job = _new_job(id=c.job_id, spec=c.spec, next_run_at=instant_or_none(
                source["job_next_run_at"]), created_at=instant(source["job_created_at"]),
                updated_at=instant(source["job_updated_at"]), shard=source["job_shard"],
                namespace=source["job_namespace"])
            claims.append(_new_claim(
                occurrence=occurrence_claimed(source, now=p.now, lease_until=lease_until,
                                              worker=p.worker),
                job=job, limited_at=instant_or_none(source["limited_at"])))
        return claims


def _rows_of(candidates: list[Candidate], rows: list[Row]) -> dict[int, Row]:
    """Each candidate's row, by the candidate's identity (hashing the keys' instants costs
    more, and the plan hands back these very objects)."""
    return {id(c): r for c, r in zip(candidates, rows, strict=True)}


def _key_args(keys: list[Key]) -> dict[str, Any]:
    return {"job_ids": [k[0] for k in keys], "scheduled": [k[1] for k in keys]}


class KeyClaimMethods(ClaimMethods):
    async def occurrence_claim_keys(self, p: b.OccurrenceClaimKeysParams) -> b.KeyClaimResult:
        keys = unique(p.keys)[:b.MAX_BATCH]
        if not keys:
            return b.KeyClaimResult(claims=[])
        async with self.pool.transaction() as conn:
            locked = await fetch_all(conn, Q["occurrence_keys_lock"], {
                **_key_args(keys), "server_clock": self.server_clock}, binary=True)
            locked = await self._with_job_locks(conn, locked)
            raw = {(r["job_id"], instant(r["scheduled_at"])): r for r in locked}
            rows = {k: _key_row(r, p.now) for k, r in raw.items()}
            busy = await self._busy_elsewhere(conn, [k for k in keys if k not in raw])
            sorted_keys = triage([k for k in keys if k not in busy], rows)
            claimable = [raw[k] for k in sorted_keys.claimable]
            candidates = [self._candidate(r) for r in claimable]
            limits, budget = await self._limits(conn, candidates, claimable, p.now)
            running, retrying = await self._unfinished_of(conn,
                                                          {c.job_id for c in candidates})
            plan = plan_claims(candidates, running, p.now, len(candidates), retrying,
                               budget=budget)
            await self._apply_marks(conn, plan, p.now)
            claims = await self._apply_claims(conn, plan, _rows_of(candidates, claimable),
                                              b.OccurrenceClaimParams(
                queue="", worker=p.worker, limit=len(candidates), now=p.now,
                lease_seconds=p.lease_seconds, lease_margin_seconds=p.lease_margin_seconds))
            await self._apply_limits(conn, plan, limits, budget, p.now)
        return b.KeyClaimResult(
            claims=claims, missed=len(plan.missed), skipped=len(plan.skipped),
            cancelled=plan.cancel_running, held=len(plan.held),
            not_due=[*sorted_keys.not_due, *left_waiting(sorted_keys.claimable, plan, rows),
                     *held_by_limits(plan, budget, p.now),
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
    return _new_key_row(state=STATES[r["state"]], due_at=due_at, priority=r["priority"],
                  held=bool(r["job_paused"] or r["queue_paused"]),
                  deleted=bool(r["job_deleted"]), due=due_at <= now and bool(r["server_due"]))
