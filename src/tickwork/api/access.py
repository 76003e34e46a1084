"""The API's access log: one INFO line per request on ``tickwork.api.access``.

Off unless ``access_log`` is set: the dashboard polls the API every few seconds and Prometheus
scrapes ``/metrics``, so at the default level the lines would drown everything else. When on,
each line says the method, the path (query values whose names look secret are masked; tokens
never ride in a query string anyway), the status, the duration in milliseconds and the name of
the token that authenticated, as text and as structured fields (``method``, ``path``,
``status``, ``duration_ms``, ``token``) for the JSON format. uvicorn's own access log stays off
(tickwork.api.server, tickwork.logs), so a request is logged once.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

access_log = logging.getLogger("tickwork.api.access")

# Query parameters whose values are masked: anything named like a credential.
SECRET_NAMES = re.compile(r"token|secret|pass|key|auth|sig|session|code|credential", re.I)
MASK = "***"
TOKEN_STATE = "tickwork_token_name"  # noqa: S105  (a key, not a secret): where authentication leaves the token's name (scope state)
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def shown_path(path: str, query: bytes) -> str:
    """``path`` and its query string with secret-looking values masked."""
    shown = quote(path, safe=_PATH_SAFE)
    if not query:
        return shown
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    masked = [(k, MASK if SECRET_NAMES.search(k) else v) for k, v in pairs]
    return f"{shown}?{urlencode(masked, safe='*')}"


class AccessLog:
    """ASGI middleware: times each HTTP request and logs it when the response has started."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})  # shared with the request, whatever copies the scope
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self._log(scope, status, (time.perf_counter() - started) * 1000)

    @staticmethod
    def _log(scope: Scope, status: int, took_ms: float) -> None:
        if not access_log.isEnabledFor(logging.INFO):
            return
        state: dict[str, Any] = scope.get("state") or {}
        token = state.get(TOKEN_STATE)
        path = shown_path(scope.get("path", ""), scope.get("query_string", b""))
        method = scope.get("method", "")
        access_log.info(
            "%s %s %d %.1fms%s", method, path, status, took_ms,
            f" token={token}" if token else "",
            extra={"method": method, "path": path, "status": status,
                   "duration_ms": round(took_ms, 1), "token": token})
