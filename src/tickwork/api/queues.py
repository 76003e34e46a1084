"""/api/v1/queues: depth, running count, the pause switch and the limits across every
worker (pausing and limiting need admin). A token of one namespace pauses and limits only the
queues its namespace owns: a shared queue is 403, another namespace's 404 (client/owners.py);
only a token without a namespace gives a queue to a namespace (``"namespace"`` in the limits
body)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from tickwork.api.auth import ADMIN, READ
from tickwork.api.body import json_body
from tickwork.api.deps import ClientDep
from tickwork.api.errors import problems
from tickwork.api.schemas import QUEUE_LIMITS_BODY
from tickwork.document.limits import parse_limits, parse_owner, queue_json

router = APIRouter(prefix="/api/v1/queues", tags=["queues"])
Body = Annotated[Any, Depends(json_body)]


@router.get("", dependencies=[READ], responses=problems(401, 403),
            summary="Every queue it may see: paused or not, waiting, due now, running, owner")
async def list_queues(client: ClientDep) -> dict[str, Any]:
    return {"items": [queue_json(q) for q in await client.list_queues()]}


@router.post("/{name}/pause", dependencies=[ADMIN], responses=problems(401, 403, 404, 422),
             summary="Stop starting runs from this queue (running ones finish)")
async def pause_queue(client: ClientDep, name: str) -> dict[str, Any]:
    return queue_json(await client.pause_queue(name))


@router.post("/{name}/resume", dependencies=[ADMIN], responses=problems(401, 403, 404, 422),
             summary="Start runs from this queue again")
async def resume_queue(client: ClientDep, name: str) -> dict[str, Any]:
    return queue_json(await client.resume_queue(name))


@router.put("/{name}/limits", dependencies=[ADMIN], openapi_extra=QUEUE_LIMITS_BODY,
            responses=problems(401, 403, 404, 413, 415, 422),
            summary="Set the queue's limits across every worker (absent or null: none), and "
            "its owner (namespace; absent: kept)")
async def set_queue_limits(client: ClientDep, name: str, body: Body) -> dict[str, Any]:
    return queue_json(await client.set_queue_limits(name, parse_limits(body),
                                                    namespace=parse_owner(body)))
