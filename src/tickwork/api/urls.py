"""URLs are text: a path or query parameter that is not UTF-8 is refused before routing.

Percent-decoding can make bytes that are not UTF-8 (``%ED%A0%80``, the bytes of a lone
surrogate, or ``%FF``); the framework would turn them into U+FFFD and look up a name nobody
stored, and a server that decodes with ``surrogateescape`` hands over a path no store can
encode. ``UrlText`` answers both with 422 naming the query parameter, or ``path``.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from tickwork.api.errors import problem_response
from tickwork.document.text import not_unicode

REASON = "must be UTF-8 text once percent-decoded"


def url_problem(scope: Scope) -> tuple[str, str] | None:
    """The field (``path`` or a query parameter's name) that is not text, and why; or None."""
    path = scope.get("path", "")
    raw_path = scope.get("raw_path")
    if not isinstance(path, str) or not_unicode(path) is not None or (
            raw_path is not None and not _utf8(unquote_to_bytes(raw_path.split(b"?", 1)[0]))):
        return "path", REASON
    query = scope.get("query_string", b"")
    if query.isascii() and b"%" not in query:
        return None
    for pair in query.split(b"&"):
        name, _, value = pair.partition(b"=")
        name_bytes = unquote_to_bytes(name.replace(b"+", b" "))
        if not _utf8(name_bytes):
            return "query", f"parameter names {REASON}"
        if not _utf8(unquote_to_bytes(value.replace(b"+", b" "))):
            return name_bytes.decode(), REASON
    return None


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class UrlText:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        problem = url_problem(scope) if scope["type"] == "http" else None
        if problem is None:
            await self.app(scope, receive, send)
            return
        field, reason = problem
        response = problem_response(422, f"{field}: {reason}", slug="validation-error",
                                    errors=[{"field": field, "message": reason}])
        await response(scope, receive, send)
