"""Request bodies: refused by size before anything reads them, then parsed as JSON once.

``BodyLimit`` is plain ASGI middleware: a ``Content-Length`` over the limit gets 413 at once,
and a body without one (chunked) is counted as it arrives and cut off at the limit. Handlers
that take a job document read it with ``json_body`` and give it to the one validator
(``tickwork.document``), so the API says exactly what the CLI says about a bad document.
Every body is text: a string or key that JSON's ``\\ud800`` escape made a lone surrogate is
refused (422, naming the field) here, before any handler sees it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tickwork.api.errors import HttpProblem, problem_response
from tickwork.document.text import check_text
from tickwork.errors import ValidationError

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
# The JSON escape of a surrogate code point: only a body holding one is walked for lone ones.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self) -> str:
        return f"the request body is larger than the limit of {self.max_bytes} bytes"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            status, detail = (413, self._too_large()) if length.isdigit() else (
                400, "Content-Length is not a number")
            response = problem_response(status, detail, slug="payload-too-large"
                                        if status == 413 else None,
                                        headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HttpProblem(413, self._too_large(), slug="payload-too-large")
            return message

        await self.app(scope, counted, send)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


async def json_body(request: Request) -> Any:
    """The request's JSON value; 415 for another media type, 422 for bad JSON."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise HttpProblem(415, "send the body as application/json",
                          slug="unsupported-media-type")
    raw = await request.body()
    if not raw.strip():
        raise ValidationError("", "the request body is empty; expected a JSON value")
    try:
        value = json.loads(raw, parse_constant=_no_constants)
    except RecursionError:
        raise ValidationError("", "the JSON body is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValidationError("", f"the request body is not valid JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(raw) is not None:
        check_text(value, "")
    return value
