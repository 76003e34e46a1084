"""The small HTTP face of a ``tickwork worker`` or ``tickwork scheduler``: /metrics, /healthz.

Off unless ``metrics_address`` is set. uvicorn serves it on the process's own event loop, so a
scrape reads the counters where they are kept, with no copying and nothing on the hot path.
There is no token: it shows counts and the process's state, never a job's payload. It binds
to loopback unless told otherwise; put it on a private network if Prometheus scrapes it from
elsewhere.

``/healthz`` answers 200 with ``{"status": "ok"}`` or, while Redis is unreachable and claims
come straight from the store, ``{"status": "degraded"}`` (the process still does its work);
503 with ``{"status": "unavailable"}`` when the store does not answer.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from fastapi import FastAPI, Response
from fastapi.responses import JSONResponse

from tickwork.api.server import ApiServer
from tickwork.config import parse_address
from tickwork.drivers.base import Store
from tickwork.errors import StoreError, TickworkError
from tickwork.metrics import CONTENT_TYPE, DEGRADED

log = logging.getLogger("tickwork.metrics")

OK, UNAVAILABLE = "ok", "unavailable"
STORE_CHECK_SECONDS = 5.0


class ProcessFace(Protocol):
    """What a process shows: its health (a JSON object with a ``status``) and its metrics."""

    async def health(self) -> dict[str, Any]: ...

    async def metrics_text(self) -> str: ...


async def store_reachable(store: Store) -> bool:
    """Whether the store answers a trivial query within STORE_CHECK_SECONDS."""
    try:
        await asyncio.wait_for(store.admin().health_check(), STORE_CHECK_SECONDS)
    except (StoreError, TimeoutError, OSError):
        return False
    return True


def status_of(store_ok: bool, mode: str) -> str:
    if not store_ok:
        return UNAVAILABLE
    return DEGRADED if mode == DEGRADED else OK


def create_process_app(face: ProcessFace) -> FastAPI:
    app = FastAPI(title="tickwork process", openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        body = await face.health()
        return JSONResponse(body, status_code=503 if body["status"] == UNAVAILABLE else 200,
                            headers={"Cache-Control": "no-store"})

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(await face.metrics_text(), media_type=CONTENT_TYPE)

    return app


async def serve_process(face: ProcessFace, address: str, role: str) -> ApiServer:
    """Serve ``face`` on ``address`` (``HOST:PORT``; port 0 picks one) and log where."""
    host, port = parse_address(address)
    server = ApiServer(create_process_app(face), host=host, port=port)
    try:
        await server.start()
    except TickworkError:
        raise TickworkError(f"could not serve metrics on {address} (is the port in use?)"
                            ) from None
    log.info("%s metrics on %s/metrics, health on %s/healthz", role, server.url, server.url)
    return server
