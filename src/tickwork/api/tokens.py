"""/api/v1/tokens: create (the secret is shown once), list and revoke API tokens (admin)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from tickwork.api.auth import ADMIN, create_token
from tickwork.api.body import json_body
from tickwork.api.deps import ClientDep
from tickwork.api.errors import problems
from tickwork.api.schemas import TOKEN_BODY
from tickwork.document.render import when
from tickwork.drivers.admin import TokenInfo, TokenRevokeParams
from tickwork.errors import ValidationError

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"])


def token_json(t: TokenInfo) -> dict[str, Any]:
    return {"id": t.id, "name": t.name, "scope": t.scope.value,
            "created_at": when(t.created_at), "last_used_at": when(t.last_used_at),
            "revoked_at": when(t.revoked_at), "namespace": t.namespace}


@router.get("", dependencies=[ADMIN], responses=problems(401, 403), summary="Every token")
async def list_tokens(client: ClientDep) -> dict[str, Any]:
    """A token of one namespace lists that namespace's tokens only."""
    return {"items": [token_json(t) for t in await client.admin.token_list()
                      if client.namespace is None or t.namespace == client.namespace]}


@router.post("", status_code=201, dependencies=[ADMIN], openapi_extra=TOKEN_BODY,
             responses=problems(401, 403, 409, 413, 415, 422),
             summary="Create a token; its secret is in this response only")
async def create(client: ClientDep, body: Annotated[Any, Depends(json_body)]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValidationError("", "send a JSON object with name and scope")
    unknown = set(body) - {"name", "scope", "namespace"}
    if unknown:
        raise ValidationError("", f"unknown field {sorted(unknown)[0]!r}")
    secret, info = await create_token(client, body.get("name", ""), body.get("scope", ""),
                                      body.get("namespace"), creator=client.namespace)
    return {"token": secret, **token_json(info)}


@router.delete("/{ref}", dependencies=[ADMIN], responses=problems(401, 403, 404),
               status_code=204, summary="Revoke a token by id or name")
async def revoke(client: ClientDep, ref: str) -> Response:
    await client.admin.token_revoke(TokenRevokeParams(ref=ref, now=client.clock.now(),
                                                      namespace=client.namespace))
    return Response(status_code=204)
