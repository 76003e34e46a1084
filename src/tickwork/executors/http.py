"""The ``http`` kind: call a URL (a GET ping or a POST webhook) and judge the status.

Payload: ``{"method": "POST", "url": "https://...", "headers": {...}, "body": <JSON> | "raw_body":
"...", "success_status": [200, 204], "retry_on_status": [409], "signing_secret": {"$secret":
"name"}}``. Every request carries ``Idempotency-Key``, ``Tickwork-Attempt``,
``Tickwork-Scheduled-At`` and ``Tickwork-Deadline`` (G6), and the Standard Webhooks signature
headers when a signing secret applies. Every hop goes through the SSRF guard; up to 5 redirects
are followed (outbound.py). 408, 429, 5xx, connection errors and timeouts are retriable, as is
any status in ``retry_on_status``; other statuses are fatal.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp
from multidict import CIMultiDict

from tickwork.errors import TickworkError, ValidationError
from tickwork.executors import webhooks
from tickwork.executors.base import (
    ERROR_LIMIT_BYTES,
    ExecutionContext,
    ExecutorSettings,
    PayloadMemo,
    cap_text,
    is_secret_reference,
    json_problem,
    payload_object,
    unresolved_secrets,
)
from tickwork.executors.outbound import OutboundClient, Response
from tickwork.models import rfc3339
from tickwork.outcomes import Fail, Outcome, Success

if TYPE_CHECKING:
    from tickwork.secrets import SecretResolver

KIND = "http"
FIELDS = ("method", "url", "headers", "body", "raw_body", "success_status", "retry_on_status",
          "signing_secret")
MAX_SIGNING_SECRETS = 2  # the current secret and, while rotating, the previous one
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


_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")


def validate_payload(payload: object, *, resolved: bool = False) -> dict[str, Any]:
    """The normalised payload, or ValidationError naming the field.

    ``resolved``: the payload's secrets have been substituted (at execution), so the signing
    secret is its value rather than a reference.
    """
    payload = payload_object(payload, FIELDS)
    out: dict[str, Any] = {"url": validate_url(payload.get("url"))}
    has_body = payload.get("body") is not None
    raw_body = payload.get("raw_body")
    if has_body and raw_body is not None:
        raise ValidationError("payload.body", "give either body or raw_body, not both")
    if has_body:
        # At execution (resolved) the payload was just decoded from the store's JSON.
        problem = None if resolved else json_problem(payload["body"])
        if problem is not None:
            raise ValidationError("payload.body", f"must be a JSON value ({problem})")
        out["body"] = payload["body"]
    if raw_body is not None:
        if not isinstance(raw_body, str) and not is_secret_reference(raw_body):
            raise ValidationError("payload.raw_body", "must be a string")
        out["raw_body"] = raw_body
    method = payload.get("method")
    if method is None:
        method = "POST" if has_body or raw_body is not None else "GET"
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise ValidationError("payload.method", f"must be one of {', '.join(METHODS)}")
    out["method"] = method.upper()
    out["headers"] = _validate_headers(payload.get("headers", {}))
    for name in ("success_status", "retry_on_status"):
        statuses = payload.get(name)
        if statuses is not None:
            out[name] = _validate_statuses(f"payload.{name}", statuses)
    if payload.get("signing_secret") is not None:
        out["signing_secret"] = _validate_signing_secret(payload["signing_secret"], resolved)
    return out


def _validate_statuses(field: str, statuses: object) -> list[int]:
    if (
        not isinstance(statuses, list)
        or not statuses
        or not all(type(s) is int and 100 <= s <= 599 for s in statuses)
    ):
        raise ValidationError(field, "must be a non-empty list of HTTP statuses (100-599)")
    return sorted(set(statuses))


def _validate_signing_secret(value: object, resolved: bool) -> Any:
    """A secret reference or a list of one or two (two while rotating); never plaintext."""
    items = value if isinstance(value, list) else [value]
    kind = str if resolved else dict
    if isinstance(value, str) and not resolved:
        raise ValidationError("payload.signing_secret", 'must be a secret reference such as '
                              '{"$secret": "hooks-key"}, never the secret itself; store it with '
                              "`tickwork secrets set`")
    if not 1 <= len(items) <= MAX_SIGNING_SECRETS or not all(
            isinstance(i, kind) and (resolved or is_secret_reference(i)) for i in items):
        raise ValidationError("payload.signing_secret", 'must be {"$secret": "name"} or a list '
                              f"of at most {MAX_SIGNING_SECRETS} such references")
    return value


def validate_url(url: object, field: str = "payload.url") -> str | dict[str, str]:
    """An http(s) URL with a host (or a secret reference to one), or ValidationError."""
    if is_secret_reference(url):
        assert isinstance(url, dict)
        return url
    if not isinstance(url, str) or not url:
        raise ValidationError(field, "is required: an http:// or https:// URL")
    if len(url) > MAX_URL_LENGTH:
        raise ValidationError(field, f"is longer than {MAX_URL_LENGTH} characters")
    if _SPACE_OR_CONTROL.search(url) is not None:
        raise ValidationError(field, "must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as exc:
        raise ValidationError(field, f"is not a valid URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValidationError(field, "must start with http:// or https://")
    if not parts.hostname:
        raise ValidationError(field, "has no host")
    return url


def _validate_headers(headers: object) -> dict[str, Any]:
    if not isinstance(headers, dict):
        raise ValidationError("payload.headers", "must be a JSON object of strings")
    for name, value in headers.items():
        if not isinstance(name, str) or _TOKEN.fullmatch(name) is None:
            raise ValidationError("payload.headers", f"{str(name)[:100]!r} is not a header name")
        field = f"payload.headers.{name}"
        if not isinstance(value, str) and not is_secret_reference(value):
            raise ValidationError(field, 'must be a string or {"$secret": "name"}')
        if isinstance(value, str) and any(c in value for c in "\r\n\0"):
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
    """Runs ``http`` jobs over one shared, guarded connection pool."""

    kind = KIND

    def __init__(self, settings: ExecutorSettings, secrets: SecretResolver | None = None, *,
                 client: OutboundClient | None = None) -> None:
        self._settings = settings
        self._secrets = secrets
        self._outbound = client or OutboundClient(settings)
        self._endpoint_secrets = parse_endpoint_secrets(settings.webhook_signing_secrets)
        self._validated: PayloadMemo[dict[str, Any]] = PayloadMemo()

    @property
    def _session(self) -> aiohttp.ClientSession | None:  # for tests: the pool in use
        return self._outbound._session

    async def close(self) -> None:
        await self._outbound.close()

    async def execute(self, ctx: ExecutionContext) -> Outcome:
        prepared = await self._prepare(ctx)
        if isinstance(prepared, Fail):
            return prepared
        payload, headers, data = prepared
        method, url = payload["method"], payload["url"]
        resp = await self._outbound.send(method, url, headers=headers, data=data,
                                         timeout_seconds=ctx.timeout_seconds,
                                         label=f"{method} {url}")
        if isinstance(resp, Fail):
            return resp
        output = f"HTTP {resp.status}\n" + cap_text(resp.body, self._settings.output_limit_bytes)
        return self._judge(payload, resp, output)

    async def _prepare(
        self, ctx: ExecutionContext
    ) -> tuple[dict[str, Any], CIMultiDict[str], bytes | None] | Fail:
        """The payload, headers (signed if a secret applies) and body, or a fatal Fail."""
        payload = self._validated.lookup(ctx.payload)
        if payload is None:
            try:
                payload = validate_payload(ctx.payload, resolved=True)
            except ValidationError as exc:
                return Fail(str(exc), retriable=False)
            # Remembered by the stored payload's identity: a recurring job's executions share
            # it (a payload with secrets is a fresh copy each time, and is checked each time).
            self._validated.remember(ctx.payload, payload)
        problem = unresolved_secrets(payload)
        if problem is not None:
            return Fail(problem, retriable=False)
        headers = self._headers(payload, ctx)
        data: bytes | None = None
        if "body" in payload:
            data = json.dumps(payload["body"]).encode()
            headers.setdefault("Content-Type", "application/json")
        elif "raw_body" in payload:
            data = payload["raw_body"].encode()
            headers.setdefault("Content-Type", "text/plain; charset=utf-8")
        try:
            secrets = await self._signing_secrets(payload, payload["url"])
            if secrets:
                headers.update(webhooks.signature_headers(
                    secrets, ctx.idempotency_key, int(time.time()), data or b""))
        except ValueError as exc:  # a secret that is not whsec_<base64>
            return Fail(f"payload.signing_secret: {exc}", retriable=False)
        except TickworkError as exc:  # a missing endpoint secret, no key
            return Fail(f"webhook_signing_secrets: {exc}", retriable=False)
        return payload, headers, data

    async def _signing_secrets(self, payload: dict[str, Any], url: str) -> list[str]:
        given = payload.get("signing_secret")
        if given is not None:
            return list(given) if isinstance(given, list) else [given]
        name = endpoint_secret(self._endpoint_secrets, url)
        if name is None:
            return []
        if self._secrets is None:
            raise TickworkError(f"{url} is to be signed with secret {name!r}, but this worker "
                                "has no secret store")
        return [await self._secrets.get(name)]

    def _headers(self, payload: dict[str, Any], ctx: ExecutionContext) -> CIMultiDict[str]:
        headers: CIMultiDict[str] = CIMultiDict({"User-Agent": self._settings.http_user_agent})
        headers.update(payload["headers"])  # user headers may replace User-Agent, not ours below
        headers["Idempotency-Key"] = ctx.idempotency_key
        headers["Tickwork-Attempt"] = str(ctx.attempt)
        headers["Tickwork-Scheduled-At"] = rfc3339(ctx.scheduled_at)
        headers["Tickwork-Deadline"] = rfc3339(ctx.deadline)
        headers["Tickwork-Job-Id"] = ctx.job_id
        headers.update(ctx.trace_headers)  # W3C trace context, when attempts are traced
        return headers

    def _judge(self, payload: dict[str, Any], resp: Response, output: str) -> Outcome:
        status = resp.status
        wanted = payload.get("success_status")
        if (status in wanted) if wanted else (200 <= status < 300):
            return Success(output=output)
        if status in RETRY_STATUSES or status >= 500 or status in payload.get(
                "retry_on_status", ()):
            delay = None
            if status in RETRY_AFTER_STATUSES:
                delay = parse_retry_after(resp.headers.get("Retry-After"), datetime.now(UTC))
            return Fail(f"HTTP {status}", retriable=True, retry_after=delay, output=output)
        if 300 <= status < 400:  # a redirect without a Location
            return Fail(f"HTTP {status}: a redirect without a Location header", retriable=False,
                        output=output)
        return Fail(f"HTTP {status}", retriable=False, output=output)

    def _short(self, text: str) -> str:
        return cap_text(text, min(ERROR_LIMIT_BYTES, self._settings.output_limit_bytes))


def parse_endpoint_secrets(entries: tuple[str, ...]) -> list[tuple[str, str]]:
    """``"URL_PREFIX=SECRET_NAME"`` entries as (prefix, name), longest prefix first."""
    pairs = []
    for entry in entries:
        prefix, sep, name = entry.rpartition("=")
        if not sep or not prefix.startswith(("http://", "https://")) or not name.strip():
            raise ValueError(f"{entry[:100]!r} is not URL_PREFIX=SECRET_NAME (the prefix "
                             "starting with http:// or https://)")
        pairs.append((prefix, name.strip()))
    return sorted(pairs, key=lambda p: len(p[0]), reverse=True)


def endpoint_secret(pairs: list[tuple[str, str]], url: str) -> str | None:
    """The secret name of the longest prefix ``url`` starts with, if any."""
    for prefix, name in pairs:
        if url.startswith(prefix):
            return name
    return None
