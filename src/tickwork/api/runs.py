"""/api/v1/runs: occurrences with filters and cursor pagination, one run's attempts, run
control (cancel, retry) and the audit trail (/api/v1/audit, /api/v1/jobs/{ref}/audit)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from tickwork.api.auth import READ, WRITE, Actor
from tickwork.api.deps import ClientDep, ReadClientDep, decode_cursor, encode_cursor
from tickwork.api.errors import problems
from tickwork.api.schemas import STATES
from tickwork.document import parse_instant
from tickwork.document.render import attempt_json, audit_json, run_json, when
from tickwork.errors import JobNotFound, ValidationError

router = APIRouter(prefix="/api/v1", tags=["runs"])
PAGE_MAX = 500


@router.get("/runs", dependencies=[READ], responses=problems(401, 403, 404, 422),
            summary="Runs (occurrences), newest first by default; pages follow next_cursor")
async def list_runs(
    client: ReadClientDep,
    *,
    job: Annotated[str | None, Query(description="a job's id or name")] = None,
    queue: Annotated[str | None, Query(description="runs of this queue")] = None,
    state: Annotated[list[str] | None, Query(description=f"any of {', '.join(STATES)}")] = None,
    since: Annotated[str | None, Query(description="scheduled at or after (RFC 3339)")] = None,
    until: Annotated[str | None, Query(description="scheduled before (RFC 3339)")] = None,
    order: Literal["newest", "oldest"] = "newest",
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 50,
) -> dict[str, Any]:
    states = state or []
    for i, s in enumerate(states):
        if s not in STATES:
            raise ValidationError(f"state[{i}]", f"must be one of {', '.join(STATES)}")
    before = None
    if cursor:
        at, job_id = decode_cursor(cursor, 2)
        before = (parse_instant(at, "cursor"), job_id)
    runs = await client.list_runs(
        job=job, queue=queue, states=states, since=parse_instant(since, "since") if since else None,
        until=parse_instant(until, "until") if until else None, before=before,
        limit=limit + 1, newest_first=order == "newest")
    page = runs[:limit]
    names: dict[str, str | None] = {}
    for run in page:
        if run.job_id not in names:
            try:  # a deleted job's history stays, under the name it had
                names[run.job_id] = (await client.jobs_by_ref(run.job_id))[0].spec.name
            except JobNotFound:
                names[run.job_id] = None
    last = page[-1] if page else None
    return {"items": [run_json(r, names[r.job_id]) for r in page],
            "next_cursor": encode_cursor([when(last.scheduled_at), last.job_id])
            if last is not None and len(runs) > limit else None}


@router.get("/jobs/{ref}/runs/{scheduled_at}", dependencies=[READ],
            responses=problems(401, 403, 404, 422),
            summary="One run and every attempt of it, with output and error")
async def get_run(client: ClientDep, ref: str, scheduled_at: str) -> dict[str, Any]:
    job, run, attempts = await client.find_run(ref, parse_instant(scheduled_at, "scheduled_at"))
    return {"run": run_json(run, job.spec.name), "attempts": [attempt_json(a) for a in attempts]}


@router.post("/jobs/{ref}/runs/{scheduled_at}/cancel", dependencies=[WRITE],
             responses=problems(401, 403, 404, 409, 422),
             summary="Cancel a waiting or running run; a running attempt is stopped")
async def cancel_run(client: ClientDep, actor: Actor, ref: str,
                     scheduled_at: str) -> dict[str, Any]:
    job = await client.get_job(ref)
    run = await client.cancel_run(job.id, parse_instant(scheduled_at, "scheduled_at"),
                                  actor=actor)
    return run_json(run, job.spec.name)


@router.post("/jobs/{ref}/runs/{scheduled_at}/retry", dependencies=[WRITE],
             responses=problems(401, 403, 404, 409, 422),
             summary="Run a dead, crashed or cancelled run again now, as its next attempt")
async def retry_run(client: ClientDep, actor: Actor, ref: str,
                    scheduled_at: str) -> dict[str, Any]:
    job = await client.get_job(ref)
    run = await client.retry_run(job.id, parse_instant(scheduled_at, "scheduled_at"),
                                 actor=actor)
    return run_json(run, job.spec.name)


@router.get("/jobs/{ref}/audit", dependencies=[READ], responses=problems(401, 403, 404, 422),
            summary="A job's recorded changes (a deleted job's too), oldest first")
async def job_audit(
    client: ClientDep, ref: str, *, cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 100,
) -> dict[str, Any]:
    return await _audit_page(client, ref, None, cursor, limit)


@router.get("/audit", dependencies=[READ], responses=problems(401, 403, 422),
            summary="Every recorded change to jobs and runs, oldest first")
async def audit(
    client: ClientDep, *,
    since: Annotated[str | None, Query(description="at or after (RFC 3339)")] = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 100,
) -> dict[str, Any]:
    return await _audit_page(client, None, parse_instant(since, "since") if since else None,
                             cursor, limit)


async def _audit_page(client: ClientDep, job: str | None, since: datetime | None,
                      cursor: str | None, limit: int) -> dict[str, Any]:
    after = None
    if cursor:
        value = decode_cursor(cursor, 1)[0]
        if not value.isdigit():
            raise ValidationError("cursor", "is not a cursor this API returned")
        after = int(value)
    entries = await client.audit(job=job, since=since, after_id=after, limit=limit + 1)
    page = entries[:limit]
    return {"items": [audit_json(e) for e in page],
            "next_cursor": encode_cursor([str(page[-1].id)]) if len(entries) > limit else None}
