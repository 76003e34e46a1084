"""/api/v1/limits: named rate limits jobs share through their ``limit_key`` (docs/limits.md).
Reading takes a read token, changing an admin token (as queue limits); a token of one
namespace sees the shared keys and its own, and changes only its own (client/owners.py)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from tickwork.api.auth import ADMIN, READ
from tickwork.api.body import json_body
from tickwork.api.deps import ClientDep
from tickwork.api.errors import problems
from tickwork.api.schemas import KEY_LIMIT_BODY
from tickwork.document.limits import key_limit_json, parse_limits, parse_owner

router = APIRouter(prefix="/api/v1/limits", tags=["limits"])
Body = Annotated[Any, Depends(json_body)]


@router.get("", dependencies=[READ], responses=problems(401, 403),
            summary="Every named limit: rate, burst and the starts available now")
async def list_limits(client: ClientDep) -> dict[str, Any]:
    return {"items": [key_limit_json(k) for k in await client.list_limits()]}


@router.put("/{key}", dependencies=[ADMIN], openapi_extra=KEY_LIMIT_BODY,
            responses=problems(401, 403, 404, 413, 415, 422),
            summary="Create or change a named limit, and its owner (namespace; absent: kept)")
async def set_limit(client: ClientDep, key: str, body: Body) -> dict[str, Any]:
    return key_limit_json(await client.set_limit(key, parse_limits(body, key=True),
                                                 namespace=parse_owner(body)))


@router.delete("/{key}", status_code=204, dependencies=[ADMIN],
               responses=problems(401, 403, 404), summary="Delete a named limit")
async def delete_limit(client: ClientDep, key: str) -> Response:
    await client.delete_limit(key)
    return Response(status_code=204)
