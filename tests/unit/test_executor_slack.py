"""The slack executor against a real local server that answers like Slack's incoming webhooks."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from tickwork.errors import ValidationError
from tickwork.executors import ExecutorSettings, validate_payload
from tickwork.executors.slack import SlackExecutor
from tickwork.outcomes import Fail, Success
from tickwork.testing.jobs import make_context

LOCAL = ("127.0.0.1",)


@pytest.fixture
async def slack() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """/services/ok answers 200 "ok"; /services/<status> answers that status, as Slack does."""
    seen: list[dict[str, Any]] = []
    answers = {400: "invalid_payload", 404: "channel_not_found", 429: "rate_limited",
               500: "internal_error"}

    async def hook(request: web.Request) -> web.Response:
        seen.append({"headers": dict(request.headers), "json": await request.json()})
        what = request.match_info["what"]
        if what == "ok":
            return web.Response(text="ok")
        status = int(what)
        headers = {"Retry-After": "7"} if status == 429 else {}
        return web.Response(status=status, text=answers[status], headers=headers)

    app = web.Application()
    app.router.add_post("/services/T0/B0/{what}", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/services/T0/B0", seen
    await runner.cleanup()


async def post(payload: dict[str, Any]) -> Any:
    ex = SlackExecutor(ExecutorSettings(outbound_allow=LOCAL))
    try:
        return await ex.execute(make_context("slack", payload))
    finally:
        await ex.close()


async def test_text_and_blocks_are_posted(slack: tuple[str, list[dict[str, Any]]]) -> None:
    base, seen = slack
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*done*"}}]
    outcome = await post({"webhook_url": f"{base}/ok", "text": "nightly report done",
                          "blocks": blocks, "username": "tickwork",
                          "icon_emoji": ":clock1:"})
    assert outcome == Success(output="HTTP 200\nok")
    [request] = seen
    assert request["json"] == {"text": "nightly report done", "blocks": blocks,
                               "username": "tickwork", "icon_emoji": ":clock1:"}
    assert request["headers"]["Content-Type"] == "application/json"
    assert request["headers"]["Idempotency-Key"] == "job-1:2030-01-02T03:04:05Z"


async def test_429_is_retried_after_retry_after(slack: tuple[str, list[dict[str, Any]]]) -> None:
    base, _ = slack
    outcome = await post({"webhook_url": f"{base}/429", "text": "x"})
    assert outcome == Fail("Slack webhook at 127.0.0.1 answered HTTP 429: rate_limited",
                           retriable=True, retry_after=7.0, output="HTTP 429\nrate_limited")


@pytest.mark.parametrize(("status", "retriable"), [(500, True), (400, False), (404, False)])
async def test_status_rules(slack: tuple[str, list[dict[str, Any]]], status: int,
                            retriable: bool) -> None:
    base, _ = slack
    outcome = await post({"webhook_url": f"{base}/{status}", "text": "x"})
    assert isinstance(outcome, Fail)
    assert outcome.retriable is retriable
    assert outcome.error.startswith(f"Slack webhook at 127.0.0.1 answered HTTP {status}: ")


async def test_a_connection_error_is_retriable_and_hides_the_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    outcome = await post({"webhook_url": f"http://127.0.0.1:{port}/services/T/B/SECRETPART",
                          "text": "x"})
    assert outcome == Fail("Slack webhook at 127.0.0.1 failed: ClientConnectorError")


async def test_the_guard_applies() -> None:
    ex = SlackExecutor(ExecutorSettings())
    outcome = await ex.execute(make_context(
        "slack", {"webhook_url": "http://127.0.0.1:9/services/T/B/X", "text": "x"}))
    await ex.close()
    assert outcome == Fail("Slack webhook at 127.0.0.1: refused to connect to 127.0.0.1 "
                           "(loopback); allow it with outbound_allow", retriable=False)


def test_validate_accepts_a_secret_url() -> None:
    payload = {"webhook_url": {"$secret": "slack-ops"}, "text": "hi"}
    assert validate_payload("slack", payload) == payload


@pytest.mark.parametrize(("payload", "field", "reason"), [
    ({"text": "x"}, "payload.webhook_url", "is required: an http:// or https:// URL"),
    ({"webhook_url": "ftp://x/", "text": "x"}, "payload.webhook_url",
     "must start with http:// or https://"),
    ({"webhook_url": "https://h/"}, "payload.text", "give text or blocks (or both)"),
    ({"webhook_url": "https://h/", "text": 3}, "payload.text", "must be a string"),
    ({"webhook_url": "https://h/", "text": " "}, "payload.text", "must be 1 to 40000 characters"),
    ({"webhook_url": "https://h/", "blocks": []}, "payload.blocks",
     'must be a list of 1 to 50 Block Kit objects, each with a "type"'),
    ({"webhook_url": "https://h/", "blocks": [{"text": "x"}]}, "payload.blocks",
     'must be a list of 1 to 50 Block Kit objects, each with a "type"'),
    ({"webhook_url": "https://h/", "text": "x", "channel": "#a"}, "payload.channel",
     "unknown field; expected one of webhook_url, text, blocks, username, icon_emoji"),
    ({"webhook_url": "https://h/", "text": "x", "username": ""}, "payload.username",
     "must be a string of 1 to 200 characters"),
])
def test_validate_rejects(payload: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_payload("slack", payload)
    assert (info.value.field, info.value.reason) == (field, reason)


def test_a_slack_job_document_is_valid() -> None:
    from tickwork.document import parse_job_document

    doc = {"name": "ops-ping", "schedule": {"every": "1h"}, "kind": "slack",
           "payload": {"webhook_url": {"$secret": "slack-ops"}, "text": "still alive"}}
    assert json.loads(json.dumps(parse_job_document(doc).spec.payload)) == doc["payload"]
