"""What handlers get from the app: the client, and how the app was configured."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from tickwork.client import AsyncClient
from tickwork.config import Settings
from tickwork.document.text import plain_text
from tickwork.errors import ValidationError
from tickwork.metrics import Metrics

Client = AsyncClient


@dataclass(slots=True)
class ApiState:
    client: AsyncClient
    open_access: bool = False
    allowed_hosts: frozenset[str] = frozenset()
    metrics: Metrics = field(default_factory=Metrics)
    retention: dict[str, Any] = field(default_factory=lambda: retention_of(Settings()))
    reader: AsyncClient | None = None  # lists and stats read here (a replica); None: client


def retention_of(settings: Settings) -> dict[str, Any]:
    """What ``GET /api/v1/retention`` shows (and the dashboard with it)."""
    return {"finished_job_retention_seconds": settings.finished_job_retention_seconds,
            "history_retention_days": settings.retention_days,
            "audit_retention_days": settings.audit_retention_days}


def state_of(request: Request) -> ApiState:
    state: ApiState = request.app.state.tickwork
    return state


PRINCIPAL_STATE = "tickwork_principal"


def _seen_by(client: AsyncClient, request: Request) -> AsyncClient:
    """``client`` seeing what the caller may see: a token of one namespace only that
    namespace; a caller with every namespace (an unscoped token, open access) every one, or
    the one its ``namespace`` query parameter names. Handlers never get another."""
    principal = getattr(request.state, PRINCIPAL_STATE, None)
    if principal is None:  # a route without authentication (/healthz)
        return client
    namespace = principal.namespace
    if namespace is None:
        namespace = request.query_params.get("namespace") or None
    return client.scoped(namespace)


def client_of(request: Request) -> AsyncClient:
    """The app's client, scoped to what the caller may see (``_seen_by``)."""
    return _seen_by(state_of(request).client, request)


def read_client_of(request: Request) -> AsyncClient:
    """The client the lists and stats read through: the read replica's, else the primary's;
    scoped as ``client_of`` is."""
    state = state_of(request)
    return _seen_by(state.reader or state.client, request)


ClientDep = Annotated[AsyncClient, Depends(client_of)]
ReadClientDep = Annotated[AsyncClient, Depends(read_client_of)]


def encode_cursor(value: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, size: int) -> list[Any]:
    """A cursor this API returned: a list of ``size`` strings."""
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        value = None
    if not (isinstance(value, list) and len(value) == size
            and all(isinstance(v, str) and plain_text(v) for v in value)):
        raise ValidationError("cursor", "is not a cursor this API returned")
    return value
