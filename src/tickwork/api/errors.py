"""The one place errors become HTTP: RFC 9457 problem details (``application/problem+json``).

tickwork's own errors map by class (ValidationError 422, LookupError 404, Forbidden 403,
Conflict 409, StoreUnavailable 503); errors that exist only at the HTTP edge (401, 403, 413,
415) are ``HttpProblem``; FastAPI's request validation and Starlette's routing errors are
rewritten into the same shape. Nothing else in the API builds an error response.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tickwork.errors import (
    Conflict,
    Forbidden,
    QuotaExceeded,
    StoreUnavailable,
    TickworkError,
    ValidationError,
)

log = logging.getLogger("tickwork.api")

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:tickwork:problem:"


class HttpProblem(Exception):
    """An error of the HTTP edge itself: authentication, CSRF, body size, media type."""

    def __init__(self, status: int, detail: str, *, slug: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.slug = slug
        self.headers = dict(headers or {})


def unauthorized(detail: str) -> HttpProblem:
    return HttpProblem(401, detail, slug="unauthorized", headers={"WWW-Authenticate": "Bearer"})


def forbidden(detail: str) -> HttpProblem:
    return HttpProblem(403, detail, slug="forbidden")


def _text(value: str) -> str:
    """``value`` as UTF-8 can write it: a lone surrogate (echoed from bad input) as ``\\udXXX``."""
    return value if value.isascii() else value.encode("utf-8", "backslashreplace").decode()


def problem_response(status: int, detail: str, *, slug: str | None = None,
                     errors: Sequence[Mapping[str, str]] | None = None,
                     headers: Mapping[str, str] | None = None,
                     extra: Mapping[str, Any] | None = None) -> JSONResponse:
    body: dict[str, Any] = {
        "type": f"{TYPE_PREFIX}{slug}" if slug else "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": _text(detail),
    }
    if errors is not None:
        body["errors"] = [{key: _text(text) for key, text in error.items()} for error in errors]
    body.update(extra or {})
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE,
                        headers=dict(headers or {}))


def problem_for(exc: BaseException) -> JSONResponse:  # noqa: PLR0911  (one branch per error class: a table)
    """The response for any exception a handler lets through."""
    if isinstance(exc, HttpProblem):
        return problem_response(exc.status, exc.detail, slug=exc.slug, headers=exc.headers)
    if isinstance(exc, QuotaExceeded):
        return _quota_problem(exc)
    if isinstance(exc, ValidationError):
        return problem_response(422, str(exc), slug="validation-error",
                                errors=[{"field": exc.field, "message": exc.reason}])
    if isinstance(exc, LookupError):
        return problem_response(404, _lookup_detail(exc), slug="not-found")
    if isinstance(exc, Forbidden):
        return problem_response(403, str(exc), slug="forbidden")
    if isinstance(exc, Conflict):
        return problem_response(409, str(exc), slug="conflict")
    if isinstance(exc, StoreUnavailable):
        return problem_response(503, "the store is unavailable; try again shortly",
                                slug="store-unavailable", headers={"Retry-After": "5"})
    log.error("unhandled error in the API", exc_info=exc)
    return problem_response(500, "internal error; the server log has the details")


def _quota_problem(exc: QuotaExceeded) -> JSONResponse:
    """429 for a quota over time (runs per hour), with Retry-After and when it resets; 422 for
    the others (jobs, payload size), which waiting does not lift."""
    extra: dict[str, Any] = {"namespace": exc.namespace, "quota": exc.quota,
                             "limit": exc.limit, "used": exc.used}
    if exc.resets_at is None:
        return problem_response(422, str(exc), slug="quota-exceeded", extra=extra)
    extra["resets_at"] = exc.resets_at.isoformat().replace("+00:00", "Z")
    return problem_response(429, str(exc), slug="quota-exceeded", extra=extra,
                            headers={"Retry-After": str(exc.retry_after or 1)})


def _lookup_detail(exc: LookupError) -> str:
    """tickwork's own messages whole ("no job 'x'"); a bare KeyError's key without the
    quotes its str() adds."""
    if isinstance(exc, KeyError) and not isinstance(exc, TickworkError) and len(exc.args) == 1:
        return str(exc.args[0])
    return str(exc)


def _request_validation(exc: RequestValidationError) -> JSONResponse:
    errors = []
    for error in exc.errors():
        where = [str(part) for part in error.get("loc", ()) if part not in ("query", "path",
                                                                             "body", "header")]
        errors.append({"field": ".".join(where) or str(error.get("loc", ("",))[0]),
                       "message": str(error.get("msg", "is not valid"))})
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors) or "invalid request"
    return problem_response(422, detail, slug="validation-error", errors=errors)


def install(app: FastAPI) -> None:
    """Register the mapping on ``app``."""

    async def on_request_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return _request_validation(exc)

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        return problem_response(exc.status_code, detail, headers=exc.headers)

    async def on_error(_: Request, exc: Exception) -> JSONResponse:
        return problem_for(exc)

    app.add_exception_handler(RequestValidationError, on_request_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    for kind in (HttpProblem, TickworkError, LookupError, Exception):
        app.add_exception_handler(kind, on_error)


PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"}, "title": {"type": "string"},
        "status": {"type": "integer"}, "detail": {"type": "string"},
        "errors": {"type": "array", "items": {
            "type": "object", "required": ["field", "message"],
            "properties": {"field": {"type": "string"}, "message": {"type": "string"}}}},
    },
}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for these error statuses."""
    return {status: {"description": HTTPStatus(status).phrase,
                     "content": {PROBLEM_MEDIA_TYPE: {"schema": PROBLEM_SCHEMA}}}
            for status in statuses}
