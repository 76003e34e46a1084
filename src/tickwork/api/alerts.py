"""/api/v1/alerts: alerts that fired, firing or resolved, with their deliveries."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from tickwork.api.auth import READ
from tickwork.api.deps import ClientDep, decode_cursor, encode_cursor
from tickwork.api.errors import problems
from tickwork.document import parse_instant
from tickwork.document.render import alert_json, when
from tickwork.drivers.alerts import MAX_ALERTS

router = APIRouter(prefix="/api/v1", tags=["alerts"])


@router.get("/alerts", dependencies=[READ], responses=problems(401, 403, 404, 422),
            summary="Alerts, newest first, each with its deliveries; pages follow next_cursor")
async def list_alerts(
    client: ClientDep,
    *,
    job: Annotated[str | None, Query(description="a job's id or name")] = None,
    state: Literal["firing", "resolved"] | None = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_ALERTS)] = 50,
) -> dict[str, Any]:
    before = None
    if cursor:
        at, alert_id = decode_cursor(cursor, 2)
        before = (parse_instant(at, "cursor"), alert_id)
    alerts = await client.list_alerts(job=job, state=state, before=before,
                                      limit=min(limit + 1, MAX_ALERTS))
    page = alerts[:limit]
    last = page[-1] if page else None
    return {"items": [alert_json(a) for a in page],
            "next_cursor": encode_cursor([when(last.fired_at), last.id])
            if last is not None and len(alerts) > limit else None}
