"""The ``slack`` kind: post a message to a Slack incoming webhook.

Payload: ``{"webhook_url": {"$secret": "slack-ops"}, "text": "...", "blocks": [...],
"username": "...", "icon_emoji": ":robot_face:"}``: ``text`` or ``blocks`` or both. The request
goes through the same guarded pool as the http kind. 429 (with its Retry-After), 5xx,
connection errors and timeouts are retriable; any other non-2xx answer (``invalid_payload``,
``channel_not_found``, ``no_service``...) is fatal. The webhook URL is a credential: it never
appears in an error, only its host does.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from multidict import CIMultiDict

from tickwork.errors import ValidationError
from tickwork.executors.base import (
    ExecutionContext,
    ExecutorSettings,
    cap_text,
    checked_payload,
    is_secret_reference,
    json_problem,
    payload_object,
)
from tickwork.executors.http import parse_retry_after, validate_url
from tickwork.executors.outbound import OutboundClient
from tickwork.models import rfc3339
from tickwork.outcomes import Fail, Outcome, Success

KIND = "slack"
FIELDS = ("webhook_url", "text", "blocks", "username", "icon_emoji")
MAX_TEXT = 40_000  # Slack truncates longer messages
MAX_BLOCKS = 50  # Slack rejects more


def validate_payload(payload: object) -> dict[str, Any]:
    """The normalised payload, or ValidationError naming the field."""
    payload = payload_object(payload, FIELDS)
    url = validate_url(payload.get("webhook_url"), "payload.webhook_url")
    out: dict[str, Any] = {"webhook_url": url}
    text, blocks = payload.get("text"), payload.get("blocks")
    if text is None and blocks is None:
        raise ValidationError("payload.text", "give text or blocks (or both)")
    if text is not None:
        if not isinstance(text, str) and not is_secret_reference(text):
            raise ValidationError("payload.text", "must be a string")
        if isinstance(text, str) and (not text.strip() or len(text) > MAX_TEXT):
            raise ValidationError("payload.text", f"must be 1 to {MAX_TEXT} characters")
        out["text"] = text
    if blocks is not None:
        if not isinstance(blocks, list) or not 1 <= len(blocks) <= MAX_BLOCKS or not all(
                isinstance(b, dict) and isinstance(b.get("type"), str) for b in blocks):
            raise ValidationError("payload.blocks", f"must be a list of 1 to {MAX_BLOCKS} "
                                  'Block Kit objects, each with a "type"')
        problem = json_problem(blocks)
        if problem is not None:
            raise ValidationError("payload.blocks", f"must be JSON ({problem})")
        out["blocks"] = blocks
    for name in ("username", "icon_emoji"):
        value = payload.get(name)
        if value is not None:
            if not isinstance(value, str) or not value.strip() or len(value) > 200:
                raise ValidationError(f"payload.{name}", "must be a string of 1 to 200 "
                                      "characters")
            out[name] = value
    return out


class SlackExecutor:
    """Posts ``slack`` jobs' messages through the guarded outbound pool."""

    kind = KIND

    def __init__(self, settings: ExecutorSettings, *, client: OutboundClient | None = None
                 ) -> None:
        self._settings = settings
        self._outbound = client or OutboundClient(settings)

    async def close(self) -> None:
        await self._outbound.close()

    async def execute(self, ctx: ExecutionContext) -> Outcome:
        payload = checked_payload(validate_payload, ctx.payload)
        if isinstance(payload, Fail):
            return payload
        url: str = payload.pop("webhook_url")
        host = urlsplit(url).hostname or "?"
        where = f"Slack webhook at {host}"
        headers: CIMultiDict[str] = CIMultiDict({
            "User-Agent": self._settings.http_user_agent,
            "Content-Type": "application/json",
            "Idempotency-Key": ctx.idempotency_key,
            "Tickwork-Attempt": str(ctx.attempt),
            "Tickwork-Scheduled-At": rfc3339(ctx.scheduled_at),
        })
        resp = await self._outbound.send(
            "POST", url, headers=headers, data=json.dumps(payload).encode(),
            timeout_seconds=ctx.timeout_seconds, label=where, show_errors=False)
        if isinstance(resp, Fail):
            return resp
        answer = cap_text(resp.body, self._settings.output_limit_bytes)
        output = f"HTTP {resp.status}\n{answer}"
        if 200 <= resp.status < 300:
            return Success(output=output)
        said = f": {answer.strip()[:200]}" if answer.strip() else ""
        error = f"{where} answered HTTP {resp.status}{said}"
        if resp.status == 429 or resp.status >= 500:
            delay = parse_retry_after(resp.headers.get("Retry-After"), datetime.now(UTC))
            return Fail(error, retriable=True, retry_after=delay, output=output)
        return Fail(error, retriable=False, output=output)
