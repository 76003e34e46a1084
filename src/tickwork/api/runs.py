"""/api/v1/runs: occurrences with filters and cursor pagination, and one run's attempts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from tickwork.api.auth import READ
from tickwork.api.deps import ClientDep, decode_cursor, encode_cursor
from tickwork.api.errors import problems
from tickwork.api.schemas import STATES
from tickwork.document import parse_instant
from tickwork.document.render import attempt_json, run_json, when
from tickwork.errors import JobNotFound, ValidationError

router = APIRouter(prefix="/api/v1", tags=["runs"])
PAGE_MAX = 500


@router.get("/runs", dependencies=[READ], responses=problems(401, 403, 404, 422),
            summary="Runs (occurrences), newest first by default; pages follow next_cursor")
async def list_runs(
    client: ClientDep,
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
            try:
                names[run.job_id] = (await client.get_job(run.job_id)).spec.name
            except JobNotFound:  # deleted: its history stays
                names[run.job_id] = None
    last = page[-1] if page else None
    return {"items": [run_json(r, names[r.job_id]) for r in page],
            "next_cursor": encode_cursor([when(last.scheduled_at), last.job_id])
            if last is not None and len(runs) > limit else None}


@router.get("/jobs/{ref}/runs/{scheduled_at}", dependencies=[READ],
            responses=problems(401, 403, 404, 422),
            summary="One run and every attempt of it, with output and error")
async def get_run(client: ClientDep, ref: str, scheduled_at: str) -> dict[str, Any]:
    job = await client.get_job(ref)
    run, attempts = await client.get_run(job.id, parse_instant(scheduled_at, "scheduled_at"))
    return {"run": run_json(run, job.spec.name), "attempts": [attempt_json(a) for a in attempts]}
