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


def retention_of(settings: Settings) -> dict[str, Any]:
    """What ``GET /api/v1/retention`` shows (and the dashboard with it)."""
    return {"finished_job_retention_seconds": settings.finished_job_retention_seconds,
            "history_retention_days": settings.retention_days,
            "audit_retention_days": settings.audit_retention_days}


def state_of(request: Request) -> ApiState:
    state: ApiState = request.app.state.tickwork
    return state


def client_of(request: Request) -> AsyncClient:
    return state_of(request).client


ClientDep = Annotated[AsyncClient, Depends(client_of)]


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
