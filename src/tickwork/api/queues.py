"""/api/v1/queues: depth, running count and the pause switch (pausing needs admin)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tickwork.api.auth import ADMIN, READ, SHARED
from tickwork.api.deps import ClientDep
from tickwork.api.errors import problems
from tickwork.drivers.admin import QueueInfo

router = APIRouter(prefix="/api/v1/queues", tags=["queues"])


def queue_json(q: QueueInfo) -> dict[str, Any]:
    return {"name": q.name, "paused": q.paused, "waiting": q.waiting, "due": q.due,
            "running": q.running}


@router.get("", dependencies=[READ], responses=problems(401, 403),
            summary="Every queue: paused or not, waiting, due now, running")
async def list_queues(client: ClientDep) -> dict[str, Any]:
    return {"items": [queue_json(q) for q in await client.list_queues()]}


@router.post("/{name}/pause", dependencies=[ADMIN, SHARED], responses=problems(401, 403, 422),
             summary="Stop starting runs from this queue (running ones finish)")
async def pause_queue(client: ClientDep, name: str) -> dict[str, Any]:
    return queue_json(await client.pause_queue(name))


@router.post("/{name}/resume", dependencies=[ADMIN, SHARED], responses=problems(401, 403, 422),
             summary="Start runs from this queue again")
async def resume_queue(client: ClientDep, name: str) -> dict[str, Any]:
    return queue_json(await client.resume_queue(name))
