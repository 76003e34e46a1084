"""/api/v1/namespaces: namespaces with their quotas and usage; quotas are set by an admin
token that sees every namespace (a namespace's own tokens cannot raise its quotas)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from tickwork.api.auth import ADMIN, READ, SHARED
from tickwork.api.body import json_body
from tickwork.api.deps import ClientDep
from tickwork.api.errors import problems
from tickwork.api.schemas import QUOTAS_BODY
from tickwork.drivers.namespaces import NamespaceInfo
from tickwork.errors import ValidationError

router = APIRouter(prefix="/api/v1/namespaces", tags=["namespaces"])


def namespace_json(n: NamespaceInfo) -> dict[str, Any]:
    return {"name": n.name, "max_jobs": n.quotas.max_jobs,
            "max_runs_per_hour": n.quotas.max_runs_per_hour,
            "max_payload_bytes": n.quotas.max_payload_bytes,
            "jobs": n.jobs, "runs_this_hour": n.runs_this_hour}


@router.get("", dependencies=[READ], responses=problems(401, 403),
            summary="Namespaces with quotas and usage (a namespace's token: its own only)")
async def list_namespaces(client: ClientDep) -> dict[str, Any]:
    return {"items": [namespace_json(n) for n in await client.list_namespaces()]}


@router.patch("/{name}", dependencies=[ADMIN, SHARED], openapi_extra=QUOTAS_BODY,
              responses=problems(401, 403, 413, 415, 422),
              summary="Set some quotas of a namespace (null lifts one); the others keep theirs")
async def set_quotas(client: ClientDep, name: str,
                     body: Annotated[Any, Depends(json_body)]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValidationError("", "send a JSON object of quotas")
    return namespace_json(await client.scoped(None).set_quotas(name, body))
