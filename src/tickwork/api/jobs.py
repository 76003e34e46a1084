"""/api/v1/jobs: create (one or many), list, read, change, pause, resume, trigger, delete,
backfill, preview, status and audit. Thin handlers over ``AsyncClient``; every change is
recorded with the token's name as its actor."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from tickwork.api.auth import READ, WRITE, Actor
from tickwork.api.body import json_body
from tickwork.api.deps import ClientDep, ReadClientDep, decode_cursor, encode_cursor
from tickwork.api.errors import problems
from tickwork.api.schemas import BACKFILL_BODY, CREATE_BODY, PATCH_BODY, PREVIEW_BODY
from tickwork.document import parse_instant, parse_job_document
from tickwork.document.render import backfill_json, fire_json, job_json, run_json, when
from tickwork.drivers.base import MAX_BATCH
from tickwork.errors import ValidationError
from tickwork.models import JobSpec, Overlap

router = APIRouter(prefix="/api/v1", tags=["jobs"])
Body = Annotated[Any, Depends(json_body)]
Ref = Annotated[str, "a job's id or name"]
PAGE_MAX = 500
PREVIEW_MAX = 100
READ_ERRORS = problems(401, 403, 404, 422)
WRITE_ERRORS = problems(401, 403, 404, 409, 413, 415, 422)
OVERLAPS = ", ".join(o.value for o in Overlap)


@router.post("/jobs", status_code=201, dependencies=[WRITE], openapi_extra=CREATE_BODY,
             responses=WRITE_ERRORS, summary="Create a job, or many from an array (all or none)")
async def create_jobs(client: ClientDep, actor: Actor, body: Body) -> dict[str, Any]:
    if isinstance(body, list):
        if not 1 <= len(body) <= MAX_BATCH:
            raise ValidationError("", f"send 1 to {MAX_BATCH} job documents (got {len(body)})")
        return {"items": [job_json(j) for j in await client.create_jobs(body, actor=actor)]}
    return job_json(await client.create_job(body, actor=actor))


@router.get("/jobs", dependencies=[READ], responses=READ_ERRORS,
            summary="List jobs by name, with filters; pages follow next_cursor")
async def list_jobs(
    client: ReadClientDep,
    *,
    name: Annotated[str | None, Query(description="name contains this (any case)")] = None,
    tag: str | None = None,
    kind: str | None = None,
    queue: str | None = None,
    paused: bool | None = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 100,
) -> dict[str, Any]:
    after = decode_cursor(cursor, 1)[0] if cursor else None
    jobs = await client.list_jobs(name_contains=name, tag=tag, kind=kind, queue=queue,
                                  paused=paused, after_name=after, limit=limit + 1)
    page = jobs[:limit]
    more = len(jobs) > limit
    return {"items": [job_json(j) for j in page],
            "next_cursor": encode_cursor([page[-1].spec.name]) if more else None}


@router.get("/jobs/{ref}", dependencies=[READ], responses=READ_ERRORS, summary="One job")
async def get_job(client: ClientDep, ref: Ref) -> dict[str, Any]:
    return job_json(await client.get_job(ref))


@router.patch("/jobs/{ref}", dependencies=[WRITE], openapi_extra=PATCH_BODY,
              responses=WRITE_ERRORS, summary="Change some fields; the others keep their values")
async def update_job(client: ClientDep, actor: Actor, ref: Ref, body: Body) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise ValidationError("", "send a JSON object with the fields to change")
    return job_json(await client.update_job(ref, body, actor=actor))


@router.delete("/jobs/{ref}", status_code=204, dependencies=[WRITE], responses=WRITE_ERRORS,
               summary="Delete a job: its waiting runs are cancelled, its history stays")
async def delete_job(client: ClientDep, actor: Actor, ref: Ref) -> Response:
    await client.delete_job(ref, actor=actor)
    return Response(status_code=204)


@router.post("/jobs/{ref}/pause", dependencies=[WRITE], responses=WRITE_ERRORS,
             summary="Pause: no new runs are planned or started")
async def pause_job(client: ClientDep, actor: Actor, ref: Ref) -> dict[str, Any]:
    return job_json(await client.pause_job(ref, actor=actor))


@router.post("/jobs/{ref}/resume", dependencies=[WRITE], responses=WRITE_ERRORS,
             summary="Resume from now on; paused fire times are not made up")
async def resume_job(client: ClientDep, actor: Actor, ref: Ref) -> dict[str, Any]:
    return job_json(await client.resume_job(ref, actor=actor))


@router.post("/jobs/{ref}/trigger", status_code=201, dependencies=[WRITE],
             responses=WRITE_ERRORS, summary="Run once now, with an idempotency key of its own")
async def trigger_job(client: ClientDep, actor: Actor, ref: Ref) -> dict[str, Any]:
    job = await client.get_job(ref)
    return run_json(await client.trigger_job(job.id, actor=actor), job.spec.name)


@router.post("/jobs/{ref}/backfill", dependencies=[WRITE], openapi_extra=BACKFILL_BODY,
             responses=WRITE_ERRORS,
             summary="Create runs (trigger=backfill) for each fire time in [from, to), "
             "or preview them (dry_run)")
async def backfill_job(client: ClientDep, actor: Actor, ref: Ref, body: Body) -> dict[str, Any]:
    fields = _object(body, {"from", "to", "limit", "overlap", "dry_run"},
                     required={"from", "to"})
    limit = fields.get("limit", MAX_BATCH)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BATCH:
        raise ValidationError("limit", f"must be an integer from 1 to {MAX_BATCH}")
    overlap = fields.get("overlap")
    if overlap is not None and not isinstance(overlap, str):
        raise ValidationError("overlap", "must be a string: one of " + OVERLAPS)
    dry_run = fields.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise ValidationError("dry_run", "must be true or false")
    job = await client.get_job(ref)
    result = await client.backfill(job.id, parse_instant(fields["from"], "from"),
                                   parse_instant(fields["to"], "to"), limit=limit,
                                   overlap=overlap, dry_run=dry_run, actor=actor)
    return backfill_json(result, job.spec.name)


@router.get("/jobs/{ref}/preview", dependencies=[READ], responses=READ_ERRORS,
            summary="The job's next fire times and its schedule in words")
async def preview_job(
    client: ClientDep, ref: Ref,
    count: Annotated[int, Query(ge=1, le=PREVIEW_MAX)] = 5,
    after: Annotated[str | None, Query(description="RFC 3339; default now")] = None,
) -> dict[str, Any]:
    job = await client.get_job(ref)
    start = parse_instant(after, "after") if after is not None else None
    return await _preview(client, job.spec, count, start, job.id)


@router.post("/preview", dependencies=[READ], openapi_extra=PREVIEW_BODY,
             responses=problems(401, 403, 413, 415, 422),
             summary="Preview a draft schedule: next fire times and a description")
async def preview_draft(client: ClientDep, body: Body) -> dict[str, Any]:
    fields = _object(body, {"schedule", "count", "after"}, required={"schedule"})
    count = fields.get("count", 5)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= PREVIEW_MAX:
        raise ValidationError("count", f"must be an integer from 1 to {PREVIEW_MAX}")
    # The one validator checks the schedule; the rest of this stand-in document is valid.
    spec = parse_job_document({"name": "preview", "kind": "http", "schedule": fields["schedule"],
                               "payload": {"url": "https://example.org/"}}).spec
    await client.schedule_of(spec, check=True)  # its calendars exist
    after = fields.get("after")
    return await _preview(client, spec, count,
                          parse_instant(after, "after") if after is not None else None)


@router.get("/jobs/{ref}/status", dependencies=[READ], responses=READ_ERRORS,
            summary="Last run, next run, success rate and start lateness over the last runs")
async def job_status(client: ClientDep, ref: Ref,
                     last: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
    job, s = await client.job_status(ref, last)
    return {
        "job_id": job.id, "name": job.spec.name, "paused": job.spec.paused,
        "next_run_at": when(job.next_run_at),
        "last_run": None if s.last_scheduled_at is None else {
            "scheduled_at": when(s.last_scheduled_at), "state": s.last_state},
        "last_n": last, "finished": s.finished, "succeeded": s.succeeded,
        "success_rate": s.success_rate, "lateness_avg_seconds": s.lateness_avg_seconds,
        "lateness_p95_seconds": s.lateness_p95_seconds, "waiting": s.waiting,
        "running": s.running, "by_state": s.by_state,
    }


async def _preview(client: ClientDep, spec: JobSpec, count: int,
                   after: datetime | None, job_id: str | None = None) -> dict[str, Any]:
    """``times``: the next fire times; ``fires``: the same, with the ones the schedule's
    calendars drop among them (``excluded_by`` names the calendar, ``reason`` says why).
    ``job_id``: a stored job's, whose automatic offset has its value."""
    fires = await client.preview_fires(spec if job_id is None else job_id, count, after)
    zoned = spec.schedule.type in ("cron", "weekly", "monthly") or spec.schedule.calendars
    return {"description": (await client.schedule_of(spec, job_id=job_id)).describe(),
            "timezone": spec.schedule.timezone if zoned else "UTC",
            "times": [when(f.at) for f in fires if f.excluded_by is None],
            "fires": [fire_json(f) for f in fires]}


def _object(body: object, known: set[str], *, required: set[str]) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise ValidationError("", "send a JSON object")
    for key in body:
        if key not in known:
            raise ValidationError("", f"unknown field {key!r}")
    for key in sorted(required):
        if key not in body:
            raise ValidationError(key, "is required")
    return body
