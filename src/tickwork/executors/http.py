"""The ``http`` kind: call a URL (a GET ping or a POST webhook) and judge the status.

Payload: ``{"method": "POST", "url": "https://...", "headers": {...}, "body": <JSON> | "raw_body":
"...", "success_status": [200, 204]}``. Every request carries ``Idempotency-Key``,
``Tickwork-Attempt``, ``Tickwork-Scheduled-At`` and ``Tickwork-Deadline`` (G6). Redirects are not
followed. 429, 5xx, connection errors and timeouts are retriable; other statuses are fatal.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from multidict import CIMultiDict

from tickwork.errors import Fail, Outcome, Success, ValidationError
from tickwork.executors.base import (
    ERROR_LIMIT_BYTES,
    ExecutionContext,
    ExecutorSettings,
    cap_text,
    json_problem,
    payload_object,
)
from tickwork.models import rfc3339

KIND = "http"
FIELDS = ("method", "url", "headers", "body", "raw_body", "success_status")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
MAX_URL_LENGTH = 2048
# Set by tickwork on every attempt; a payload may not set them.
RESERVED_HEADERS = ("idempotency-key", "tickwork-attempt", "tickwork-scheduled-at",
                    "tickwork-deadline", "tickwork-job-id")
# Framing is aiohttp's job; a payload that set these would corrupt the request.
FRAMING_HEADERS = ("content-length", "transfer-encoding", "connection")
RETRY_STATUSES = frozenset({408, 429})  # plus every 5xx
RETRY_AFTER_STATUSES = frozenset({429, 503})

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 field-name


def validate_payload(payload: object) -> dict[str, Any]:
    """The normalised payload, or ValidationError naming the field."""
    payload = payload_object(payload, FIELDS)
    out: dict[str, Any] = {"url": _validate_url(payload.get("url"))}
    has_body = payload.get("body") is not None
    raw_body = payload.get("raw_body")
    if has_body and raw_body is not None:
        raise ValidationError("payload.body", "give either body or raw_body, not both")
    if has_body:
        problem = json_problem(payload["body"])
        if problem is not None:
            raise ValidationError("payload.body", f"must be a JSON value ({problem})")
        out["body"] = payload["body"]
    if raw_body is not None:
        if not isinstance(raw_body, str):
            raise ValidationError("payload.raw_body", "must be a string")
        out["raw_body"] = raw_body
    method = payload.get("method")
    if method is None:
        method = "POST" if has_body or raw_body is not None else "GET"
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise ValidationError("payload.method", f"must be one of {', '.join(METHODS)}")
    out["method"] = method.upper()
    out["headers"] = _validate_headers(payload.get("headers", {}))
    statuses = payload.get("success_status")
    if statuses is not None:
        if (
            not isinstance(statuses, list)
            or not statuses
            or not all(type(s) is int and 100 <= s <= 599 for s in statuses)
        ):
            raise ValidationError(
                "payload.success_status", "must be a non-empty list of HTTP statuses (100-599)"
            )
        out["success_status"] = sorted(set(statuses))
    return out


def _validate_url(url: object) -> str:
    if not isinstance(url, str) or not url:
        raise ValidationError("payload.url", "is required: an http:// or https:// URL")
    if len(url) > MAX_URL_LENGTH:
        raise ValidationError("payload.url", f"is longer than {MAX_URL_LENGTH} characters")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise ValidationError("payload.url", "must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as exc:
        raise ValidationError("payload.url", f"is not a valid URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValidationError("payload.url", "must start with http:// or https://")
    if not parts.hostname:
        raise ValidationError("payload.url", "has no host")
    return url


def _validate_headers(headers: object) -> dict[str, str]:
    if not isinstance(headers, dict):
        raise ValidationError("payload.headers", "must be a JSON object of strings")
    for name, value in headers.items():
        if not isinstance(name, str) or _TOKEN.fullmatch(name) is None:
            raise ValidationError("payload.headers", f"{str(name)[:100]!r} is not a header name")
        field = f"payload.headers.{name}"
        if not isinstance(value, str):
            raise ValidationError(field, "must be a string")
        if any(c in value for c in "\r\n\0"):
            raise ValidationError(field, "must not contain line breaks or NUL")
        lower = name.lower()
        if lower in RESERVED_HEADERS:
            raise ValidationError(field, "is set by tickwork on every attempt")
        if lower in FRAMING_HEADERS:
            raise ValidationError(field, "is set by the HTTP client")
    return dict(headers)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After value (delay-seconds or an HTTP date), or None."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - now).total_seconds(), 0.0)


class HttpExecutor:
    """Runs ``http`` jobs over one shared connection pool."""

    kind = KIND

    def __init__(self, settings: ExecutorSettings) -> None:
        self._settings = settings
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._settings.http_max_connections, limit_per_host=0
            )
            # Jobs must not see each other's cookies: no cookie jar.
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar()
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def execute(self, ctx: ExecutionContext) -> Outcome:
        try:
            payload = validate_payload(ctx.payload)
        except ValidationError as exc:
            return Fail(str(exc), retriable=False)
        headers = self._headers(payload, ctx)
        data: str | bytes | None = None
        if "body" in payload:
            data = json.dumps(payload["body"]).encode()
            headers.setdefault("Content-Type", "application/json")
        elif "raw_body" in payload:
            data = payload["raw_body"]
        method, url = payload["method"], payload["url"]
        timeout = aiohttp.ClientTimeout(total=ctx.timeout_seconds)
        try:
            async with self._client().request(
                method, url, headers=headers, data=data, allow_redirects=False, timeout=timeout
            ) as resp:
                body = b"" if method == "HEAD" else await self._read_capped(resp)
                status = resp.status
                retry_after = resp.headers.get("Retry-After")
                location = resp.headers.get("Location")
        except TimeoutError:
            return Fail(f"{method} {url} timed out after {ctx.timeout_seconds:g}s")
        except aiohttp.InvalidURL as exc:
            return Fail(f"invalid URL {exc}", retriable=False)
        except aiohttp.ClientError as exc:
            return Fail(self._short(f"{method} {url} failed: {type(exc).__name__}: {exc}"))
        output = f"HTTP {status}\n" + cap_text(body, self._settings.output_limit_bytes)
        return self._judge(payload, status, output, retry_after, location)

    def _headers(self, payload: dict[str, Any], ctx: ExecutionContext) -> CIMultiDict[str]:
        headers: CIMultiDict[str] = CIMultiDict({"User-Agent": self._settings.http_user_agent})
        headers.update(payload["headers"])  # user headers may replace User-Agent, not ours below
        headers["Idempotency-Key"] = ctx.idempotency_key
        headers["Tickwork-Attempt"] = str(ctx.attempt)
        headers["Tickwork-Scheduled-At"] = rfc3339(ctx.scheduled_at)
        headers["Tickwork-Deadline"] = rfc3339(ctx.deadline)
        headers["Tickwork-Job-Id"] = ctx.job_id
        return headers

    async def _read_capped(self, resp: aiohttp.ClientResponse) -> bytes:
        """At most output_limit_bytes + 1 bytes of the body; the rest is never read."""
        want = self._settings.output_limit_bytes + 1
        chunks: list[bytes] = []
        got = 0
        while got < want:
            chunk = await resp.content.read(want - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _judge(
        self,
        payload: dict[str, Any],
        status: int,
        output: str,
        retry_after: str | None,
        location: str | None,
    ) -> Outcome:
        wanted = payload.get("success_status")
        if (status in wanted) if wanted else (200 <= status < 300):
            return Success(output=output)
        if status in RETRY_STATUSES or status >= 500:
            delay = None
            if status in RETRY_AFTER_STATUSES:
                delay = parse_retry_after(retry_after, datetime.now(UTC))
            return Fail(f"HTTP {status}", retriable=True, retry_after=delay, output=output)
        if 300 <= status < 400:
            where = f" to {location}" if location else ""
            return Fail(
                self._short(f"HTTP {status}: redirect{where} not followed"),
                retriable=False,
                output=output,
            )
        return Fail(f"HTTP {status}", retriable=False, output=output)

    def _short(self, text: str) -> str:
        return cap_text(text, min(ERROR_LIMIT_BYTES, self._settings.output_limit_bytes))
