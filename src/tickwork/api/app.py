"""The ASGI app: the REST API (/api/v1, /openapi.json, /docs), /metrics, /healthz and the
dashboard (/dashboard), over one ``AsyncClient``."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import FileResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from tickwork import __version__
from tickwork.api import (
    alerts,
    apidocs,
    auth,
    calendars,
    enqueue,
    errors,
    jobs,
    limits,
    namespaces,
    queues,
    runs,
    stats,
    tokens,
)
from tickwork.api.access import AccessLog
from tickwork.api.auth import LOOPBACK_HOSTS, READ
from tickwork.api.body import DEFAULT_MAX_BODY_BYTES, BodyLimit
from tickwork.api.deps import ApiState, ClientDep, state_of
from tickwork.api.urls import UrlText
from tickwork.client import AsyncClient
from tickwork.metrics import CONTENT_TYPE, Metrics
from tickwork.models import OccurrenceState

log = logging.getLogger("tickwork.api")

DASHBOARD_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                 "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
                 "frame-ancestors 'none'")


def own_path(request: Request) -> str:
    """The request's path within this app: without the prefix it is mounted at, if any."""
    path, root = request.url.path, request.scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def create_app(client: AsyncClient, *, open_access: bool = False,
               allowed_hosts: Iterable[str] = (), metrics: Metrics | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, access_log: bool = False,
               retention: dict[str, Any] | None = None,
               read_client: AsyncClient | None = None) -> FastAPI:
    """The app. ``open_access`` serves everyone with admin rights: only for loopback binds
    (the CLI refuses it otherwise); ``allowed_hosts`` adds Host names open access answers;
    ``access_log``: a line per request on ``tickwork.api.access`` (tickwork.api.access);
    ``retention``: what ``/api/v1/retention`` shows (``deps.retention_of(settings)``);
    ``read_client``: the job and run lists and the stats read through it (a read replica's
    client, which the caller also opens and closes), else through ``client``.

    It can be served alone (``tickwork api``) or mounted in another ASGI app
    (``outer.mount("/scheduler", create_app(client))``): the dashboard then lives at
    ``/scheduler/dashboard/`` and calls the API under ``/scheduler/api/v1``
    (docs/integration.md). The caller opens and closes ``client``."""
    app = FastAPI(
        title="tickwork", version=__version__,
        description="Jobs, runs, queues and stats of a tickwork deployment. Authenticate with "
                    "`Authorization: Bearer <token>` (`tickwork tokens create`). Errors are "
                    "RFC 9457 problem details.",
        docs_url=None, redoc_url=None,  # apidocs serves them, with no file from a CDN
    )
    app.state.tickwork = ApiState(
        client=client, reader=read_client, open_access=open_access,
        metrics=metrics or Metrics(),
        allowed_hosts=frozenset({*LOOPBACK_HOSTS, *(h.lower() for h in allowed_hosts)}))
    if retention is not None:
        app.state.tickwork.retention = retention
    errors.install(app)
    apidocs.install(app)
    for module in (jobs, enqueue, calendars, runs, alerts, queues, limits, stats, tokens, auth,
                   namespaces):
        app.include_router(module.router)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(UrlText)

    @app.middleware("http")
    async def security_headers(request: Request,
                               call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        path = own_path(request)
        if path.startswith("/dashboard"):
            response.headers["Content-Security-Policy"] = DASHBOARD_CSP
            response.headers["X-Frame-Options"] = "DENY"
        if path.startswith("/api/"):
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    if access_log:  # outermost: it times and sees every answer, the rejected ones too
        app.add_middleware(AccessLog)

    @app.get("/healthz", tags=["health"], summary="200 when the store answers, else 503",
             description="`status` is `degraded` (still 200) while a process that claims "
                         "through Redis cannot reach it and claims from the store; `mode` "
                         "(`tickwork run` only) is `redis`, `degraded`, `sqlite` or `postgres`.",
             responses=errors.problems(503))
    async def healthz(request: Request, client: ClientDep) -> dict[str, Any]:
        await client.admin.health_check()
        dispatch = state_of(request).metrics.dispatch
        if dispatch is None:  # `tickwork api`: it claims nothing
            return {"status": "ok", "store": "ok"}
        return {"status": "degraded" if dispatch.degraded else "ok", "store": "ok",
                "mode": dispatch.mode}

    @app.get("/metrics", tags=["health"], dependencies=[READ], response_class=Response,
             summary="Prometheus text exposition", responses=errors.problems(401, 403))
    async def metrics_text(request: Request, client: ClientDep) -> Response:
        stats_now = await client.stats(60)
        text = state_of(request).metrics.render(
            states=stats_now.occurrences_by_state, queues=await client.list_queues(),
            limits=await client.list_limits(),
            all_states=[s.value for s in OccurrenceState],
            namespaces=await client.list_namespaces())
        return Response(text, media_type=CONTENT_TYPE)

    static = resources.files("tickwork.dashboard") / "static"

    @app.get("/", include_in_schema=False)
    @app.get("/dashboard", include_in_schema=False)
    async def to_dashboard(request: Request) -> RedirectResponse:
        # The page loads its scripts and the API relative to <mount>/dashboard/.
        return RedirectResponse(f"{request.scope.get('root_path', '')}/dashboard/",
                                status_code=307)

    @app.get("/dashboard/", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(str(static / "index.html"), media_type="text/html")

    app.mount("/dashboard/static", StaticFiles(directory=str(static)), name="dashboard-static")
    return app
