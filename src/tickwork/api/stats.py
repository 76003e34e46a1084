"""/api/v1/stats: counts by state, and throughput and lateness per minute for the plots."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from tickwork.api.auth import READ
from tickwork.api.deps import ReadClientDep
from tickwork.api.errors import problems
from tickwork.document.render import when

router = APIRouter(prefix="/api/v1", tags=["stats"])


@router.get("/stats", dependencies=[READ], responses=problems(401, 403, 422),
            summary="Overall counts, and per-minute throughput and start lateness")
async def stats(client: ReadClientDep,
                window: Annotated[int, Query(ge=60, le=86400, description="seconds")] = 3600,
                ) -> dict[str, Any]:
    s = await client.stats(window)
    return {
        "jobs": s.jobs, "jobs_paused": s.jobs_paused,
        "occurrences_by_state": s.occurrences_by_state,
        "attempts_by_outcome": s.attempts_by_outcome, "window_seconds": window,
        "per_minute": [{"minute": when(p.minute), "finished": p.finished,
                        "lateness_avg_seconds": p.lateness_avg_seconds,
                        "lateness_max_seconds": p.lateness_max_seconds}
                       for p in s.per_minute],
    }
