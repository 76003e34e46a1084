"""The http executor against a real local aiohttp server."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any
from urllib.parse import quote

import pytest
from aiohttp import web

from tickwork.errors import ValidationError
from tickwork.executors import ExecutorSettings, validate_payload
from tickwork.executors.http import HttpExecutor, parse_retry_after
from tickwork.outcomes import Fail, Success
from tickwork.testing.jobs import make_context

LOCAL = ("127.0.0.1",)  # the test servers' address, refused by the SSRF guard by default


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    base: str
    seen: list[Seen] = field(default_factory=list)
    slow_started: asyncio.Event = field(default_factory=asyncio.Event)
    slow_dropped: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server(base="")

    async def record(request: web.Request) -> None:
        state.seen.append(Seen(request.method, request.path, dict(request.headers),
                               await request.read()))

    async def ok(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(text="fine")

    async def status(request: web.Request) -> web.Response:
        await record(request)
        code = int(request.match_info["code"])
        headers = {}
        if "retry_after" in request.query:
            headers["Retry-After"] = request.query["retry_after"]
        return web.Response(status=code, text=f"status {code}", headers=headers)

    async def redirect(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(status=302, headers={"Location": "/ok"})

    async def endless(request: web.Request) -> web.StreamResponse:
        # Far more than any cap; a client that read it all would time out the test.
        resp = web.StreamResponse()
        await resp.prepare(request)
        chunk = b"y" * 65536
        try:
            for _ in range(100_000):
                await resp.write(chunk)
        except ConnectionError:
            pass  # the client hung up after reading what it wanted
        return resp

    async def slow(request: web.Request) -> web.Response:
        state.slow_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            state.slow_dropped.set()
            raise
        return web.Response()  # pragma: no cover

    app = web.Application()
    app.router.add_route("*", "/ok", ok)
    app.router.add_route("*", "/status/{code}", status)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/endless", endless)
    app.router.add_get("/slow", slow)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    state.base = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        await runner.cleanup()


@pytest.fixture
async def executor() -> AsyncIterator[HttpExecutor]:
    ex = HttpExecutor(ExecutorSettings(http_user_agent="tickwork-test", outbound_allow=LOCAL))
    try:
        yield ex
    finally:
        await ex.close()


async def call(ex: HttpExecutor, payload: dict[str, Any], **ctx: Any) -> Any:
    return await asyncio.wait_for(ex.execute(make_context("http", payload, **ctx)), 10)


# --- requests ----------------------------------------------------------------------------


async def test_get_is_the_default_and_headers_are_sent(server: Server,
                                                       executor: HttpExecutor) -> None:
    outcome = await call(executor, {"url": server.base + "/ok", "headers": {"X-Team": "ops"}},
                         attempt=2)
    assert outcome == Success(output="HTTP 200\nfine")
    [seen] = server.seen
    assert seen.method == "GET"
    assert seen.body == b""
    assert seen.headers["Idempotency-Key"] == "job-1:2030-01-02T03:04:05Z"
    assert seen.headers["Tickwork-Attempt"] == "2"
    assert seen.headers["Tickwork-Scheduled-At"] == "2030-01-02T03:04:05Z"
    assert seen.headers["Tickwork-Deadline"] == "2030-01-02T03:04:35Z"
    assert seen.headers["Tickwork-Job-Id"] == "job-1"
    assert seen.headers["User-Agent"] == "tickwork-test"
    assert seen.headers["X-Team"] == "ops"


async def test_json_body_defaults_to_post(server: Server, executor: HttpExecutor) -> None:
    body = {"a": 1, "b": ["x", None]}
    outcome = await call(executor, {"url": server.base + "/ok", "body": body})
    assert isinstance(outcome, Success)
    [seen] = server.seen
    assert seen.method == "POST"
    assert seen.headers["Content-Type"] == "application/json"
    assert json.loads(seen.body) == body


async def test_raw_body_with_own_content_type(server: Server, executor: HttpExecutor) -> None:
    payload = {"method": "put", "url": server.base + "/ok", "raw_body": "a=1&b=ü",
               "headers": {"Content-Type": "application/x-www-form-urlencoded"}}
    assert isinstance(await call(executor, payload), Success)
    [seen] = server.seen
    assert seen.method == "PUT"
    assert seen.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert seen.body == "a=1&b=ü".encode()


async def test_user_agent_can_be_replaced(server: Server, executor: HttpExecutor) -> None:
    await call(executor, {"url": server.base + "/ok", "headers": {"user-agent": "mine"}})
    assert server.seen[0].headers["User-Agent"] == "mine"


async def test_head_reads_no_body(server: Server, executor: HttpExecutor) -> None:
    outcome = await call(executor, {"method": "HEAD", "url": server.base + "/ok"})
    assert outcome == Success(output="HTTP 200\n")


# --- statuses ----------------------------------------------------------------------------


async def test_500_is_retriable(server: Server, executor: HttpExecutor) -> None:
    outcome = await call(executor, {"url": server.base + "/status/500"})
    assert outcome == Fail("HTTP 500", retriable=True, output="HTTP 500\nstatus 500")


async def test_404_is_fatal(server: Server, executor: HttpExecutor) -> None:
    outcome = await call(executor, {"url": server.base + "/status/404"})
    assert outcome == Fail("HTTP 404", retriable=False, output="HTTP 404\nstatus 404")


async def test_429_with_retry_after_seconds(server: Server, executor: HttpExecutor) -> None:
    outcome = await call(executor, {"url": server.base + "/status/429?retry_after=7"})
    assert isinstance(outcome, Fail)
    assert outcome.retriable
    assert outcome.retry_after == 7.0


async def test_503_with_retry_after_date(server: Server, executor: HttpExecutor) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    outcome = await call(executor, {"url": f"{server.base}/status/503?retry_after={quote(when)}"})
    assert isinstance(outcome, Fail)
    assert outcome.retriable
    assert outcome.retry_after is not None
    assert 100 < outcome.retry_after <= 120


async def test_503_without_retry_after(server: Server, executor: HttpExecutor) -> None:
    outcome = await call(executor, {"url": server.base + "/status/503"})
    assert outcome == Fail("HTTP 503", retriable=True, output="HTTP 503\nstatus 503")


async def test_redirect_is_followed(server: Server, executor: HttpExecutor) -> None:
    outcome = await call(executor, {"url": server.base + "/redirect"})
    assert outcome == Success(output="HTTP 200\nfine")
    assert [s.path for s in server.seen] == ["/redirect", "/ok"]


async def test_success_status_override(server: Server, executor: HttpExecutor) -> None:
    url = server.base + "/status/404"
    assert isinstance(await call(executor, {"url": url, "success_status": [404]}), Success)
    outcome = await call(executor, {"url": server.base + "/ok", "success_status": [201]})
    assert outcome == Fail("HTTP 200", retriable=False, output="HTTP 200\nfine")


async def test_large_body_is_capped_without_reading_it_all(server: Server) -> None:
    ex = HttpExecutor(ExecutorSettings(output_limit_bytes=1000, outbound_allow=LOCAL))
    try:
        outcome = await call(ex, {"url": server.base + "/endless"})
    finally:
        await ex.close()
    assert isinstance(outcome, Success)
    assert outcome.output is not None
    head, _, body = outcome.output.partition("\n")
    assert head == "HTTP 200"
    assert len(body.encode()) <= 1000
    assert body.startswith("yyyy")
    assert body.endswith("[truncated]")


# --- failures without a response --------------------------------------------------------


async def test_connection_refused_is_retriable(executor: HttpExecutor) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    outcome = await call(executor, {"url": f"http://127.0.0.1:{port}/"})
    assert isinstance(outcome, Fail)
    assert outcome.retriable
    assert outcome.error.startswith(f"GET http://127.0.0.1:{port}/ failed: ClientConnectorError")


async def test_request_timeout_is_retriable(server: Server, executor: HttpExecutor) -> None:
    outcome = await call(executor, {"url": server.base + "/slow"}, timeout_seconds=0.2)
    assert outcome == Fail(f"GET {server.base}/slow timed out after 0.2s", retriable=True)


async def test_cancel_drops_the_connection(server: Server, executor: HttpExecutor) -> None:
    task = asyncio.create_task(
        executor.execute(make_context("http", {"url": server.base + "/slow"}))
    )
    await asyncio.wait_for(server.slow_started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    await asyncio.wait_for(server.slow_dropped.wait(), 10)


async def test_session_is_reused_and_closed(server: Server) -> None:
    ex = HttpExecutor(ExecutorSettings(outbound_allow=LOCAL))
    await call(ex, {"url": server.base + "/ok"})
    session = ex._session
    await call(ex, {"url": server.base + "/ok"})
    assert ex._session is session
    await ex.close()
    assert session is not None
    assert session.closed


# --- validate_payload --------------------------------------------------------------------


def test_validate_normalises() -> None:
    assert validate_payload("http", {"url": "https://example.org/x"}) == {
        "url": "https://example.org/x", "method": "GET", "headers": {},
    }
    assert validate_payload("http", {"url": "http://h/", "raw_body": "x",
                                     "success_status": [204, 200, 204]}) == {
        "url": "http://h/", "method": "POST", "headers": {}, "raw_body": "x",
        "success_status": [200, 204],
    }


def test_validate_null_body_is_no_body() -> None:
    assert validate_payload("http", {"url": "http://h/", "body": None})["method"] == "GET"


@pytest.mark.parametrize(
    ("payload", "field", "reason"),
    [
        ("http://h/", "payload", "must be a JSON object"),
        ({"url": "http://h/", "timeout": 3}, "payload.timeout",
         "unknown field; expected one of method, url, headers, body, raw_body, success_status, "
         "retry_on_status, signing_secret"),
        ({}, "payload.url", "is required: an http:// or https:// URL"),
        ({"url": 7}, "payload.url", "is required: an http:// or https:// URL"),
        ({"url": "http://h/" + "a" * 2048}, "payload.url", "is longer than 2048 characters"),
        ({"url": "http://h/a b"}, "payload.url", "must not contain spaces or control characters"),
        ({"url": "ftp://h/"}, "payload.url", "must start with http:// or https://"),
        ({"url": "example.org/x"}, "payload.url", "must start with http:// or https://"),
        ({"url": "http:///path"}, "payload.url", "has no host"),
        ({"url": "http://h:99999/"}, "payload.url",
         "is not a valid URL (Port out of range 0-65535)"),
        ({"url": "http://[::1/"}, "payload.url", "is not a valid URL (Invalid IPv6 URL)"),
        ({"url": "http://h/", "method": "TRACE"}, "payload.method",
         "must be one of GET, POST, PUT, PATCH, DELETE, HEAD"),
        ({"url": "http://h/", "method": 1}, "payload.method",
         "must be one of GET, POST, PUT, PATCH, DELETE, HEAD"),
        ({"url": "http://h/", "body": {}, "raw_body": "x"}, "payload.body",
         "give either body or raw_body, not both"),
        ({"url": "http://h/", "body": float("nan")}, "payload.body",
         "must be a JSON value (NaN and Infinity are not JSON)"),
        ({"url": "http://h/", "body": {"a": object()}}, "payload.body",
         "must be a JSON value (Object of type object is not JSON serializable)"),
        ({"url": "http://h/", "raw_body": {"a": 1}}, "payload.raw_body", "must be a string"),
        ({"url": "http://h/", "headers": []}, "payload.headers",
         "must be a JSON object of strings"),
        ({"url": "http://h/", "headers": {"Bad Name": "x"}}, "payload.headers",
         "'Bad Name' is not a header name"),
        ({"url": "http://h/", "headers": {"X-A": 1}}, "payload.headers.X-A",
         'must be a string or {"$secret": "name"}'),
        ({"url": "http://h/", "headers": {"X-A": "a\r\nX-B: b"}}, "payload.headers.X-A",
         "must not contain line breaks or NUL"),
        ({"url": "http://h/", "headers": {"idempotency-key": "mine"}},
         "payload.headers.idempotency-key", "is set by tickwork on every attempt"),
        ({"url": "http://h/", "headers": {"Tickwork-Attempt": "9"}},
         "payload.headers.Tickwork-Attempt", "is set by tickwork on every attempt"),
        ({"url": "http://h/", "headers": {"Content-Length": "9"}},
         "payload.headers.Content-Length", "is set by the HTTP client"),
        ({"url": "http://h/", "success_status": []}, "payload.success_status",
         "must be a non-empty list of HTTP statuses (100-599)"),
        ({"url": "http://h/", "success_status": 200}, "payload.success_status",
         "must be a non-empty list of HTTP statuses (100-599)"),
        ({"url": "http://h/", "success_status": [200, 600]}, "payload.success_status",
         "must be a non-empty list of HTTP statuses (100-599)"),
        ({"url": "http://h/", "success_status": [True]}, "payload.success_status",
         "must be a non-empty list of HTTP statuses (100-599)"),
    ],
)
def test_validate_rejects(payload: object, field: str, reason: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_payload("http", payload)
    assert (info.value.field, info.value.reason) == (field, reason)


async def test_invalid_payload_at_execution_is_fatal(executor: HttpExecutor) -> None:
    outcome = await call(executor, {"url": "ftp://h/"})
    assert outcome == Fail("payload.url: must start with http:// or https://", retriable=False)


# --- Retry-After -------------------------------------------------------------------------


NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("30", 30.0),
        (" 5 ", 5.0),
        ("Tue, 01 Jan 2030 00:01:00 GMT", 60.0),
        ("Mon, 31 Dec 2029 23:00:00 GMT", 0.0),
        ("soon", None),
        ("-3", None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, NOW) == expected
