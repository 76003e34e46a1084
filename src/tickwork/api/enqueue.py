"""/api/v1/enqueue: one-off jobs without a name (one, or many at once), and the retention
settings that say when finished ones are purged. Thin handlers over ``AsyncClient``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from tickwork.api.auth import READ, WRITE, Actor
from tickwork.api.body import json_body
from tickwork.api.deps import ClientDep, state_of
from tickwork.api.errors import problems
from tickwork.api.schemas import ENQUEUE_BODY, ENQUEUE_BULK_BODY
from tickwork.client.oneoff import ENQUEUE_MAX
from tickwork.document.render import job_json
from tickwork.drivers.enqueue import Enqueued
from tickwork.errors import ValidationError

router = APIRouter(prefix="/api/v1", tags=["enqueue"])
Body = Annotated[Any, Depends(json_body)]
WRITE_ERRORS = problems(401, 403, 409, 413, 415, 422)


def enqueued_json(done: Enqueued) -> dict[str, Any]:
    return {"created": done.created, "job": job_json(done.job)}


@router.post("/enqueue", status_code=201, dependencies=[WRITE], openapi_extra=ENQUEUE_BODY,
             responses={200: {"description": "the dedupe key is held: the job holding it"},
                        **WRITE_ERRORS},
             summary="Enqueue a one-off job (no name needed); 200 with the existing job if "
                     "its dedupe key is held")
async def enqueue(client: ClientDep, actor: Actor, body: Body,
                  response: Response) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValidationError("", "send one enqueue request as a JSON object "
                              "(many: POST /api/v1/enqueue/bulk with an array)")
    done = await client.enqueue_request(body, actor=actor)
    if not done.created:
        response.status_code = 200
    return enqueued_json(done)


@router.post("/enqueue/bulk", status_code=201, dependencies=[WRITE],
             openapi_extra=ENQUEUE_BULK_BODY, responses=WRITE_ERRORS,
             summary="Enqueue many one-off jobs in one transaction (all or none)")
async def enqueue_bulk(client: ClientDep, actor: Actor, body: Body) -> dict[str, Any]:
    if not isinstance(body, list) or not 1 <= len(body) <= ENQUEUE_MAX:
        got = f"{len(body)} items" if isinstance(body, list) else "not an array"
        raise ValidationError("", f"send an array of 1 to {ENQUEUE_MAX} enqueue requests "
                              f"(got {got})")
    return {"items": [enqueued_json(d) for d in await client.enqueue_many(body, actor=actor)]}


@router.get("/retention", dependencies=[READ], responses=problems(401, 403),
            summary="How long finished one-off and deleted jobs, and run history, are kept")
async def retention(request: Request) -> dict[str, Any]:
    return dict(state_of(request).retention)
