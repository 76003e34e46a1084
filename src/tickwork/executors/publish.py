"""The ``publish`` kind: publish one message to a broker; success is the broker's ack.

Payload: ``{"broker": "events", "exchange": "jobs", "routing_key": "billing.run", "body": {...}}``
for RabbitMQ, ``"subject"`` for NATS JetStream, ``"topic"`` for MQTT, ``"stream"`` (and
``"maxlen"``) for Redis Streams. A job names a broker configured in the settings
(``ExecutorSettings.brokers``): its URL and credentials never sit in a job. The message is the
body as JSON, with the idempotency key, the attempt, the scheduled time, the job id and, when
attempts are traced, the trace context (``traceparent``) as headers (``brokers.py`` says how
each broker carries them).

A refused address, a missing library, a login refused or a broker name this worker does not know
is fatal; a connection failure, a nack, a missing exchange or stream, or no ack in time is
retriable. Connections are opened on first use, one per broker, reused by every firing and
closed when the worker stops.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tickwork.errors import TickworkError, ValidationError
from tickwork.executors.base import (
    ERROR_LIMIT_BYTES,
    ExecutionContext,
    ExecutorSettings,
    cap_text,
    checked_payload,
    json_problem,
    payload_object,
)
from tickwork.executors.brokers import (
    BrokerClient,
    BrokerRefused,
    BrokerUnavailable,
    Message,
    broker_family,
    open_client,
)
from tickwork.executors.ssrf import OutboundPolicy
from tickwork.models import rfc3339
from tickwork.outcomes import Fail, Outcome, Success
from tickwork.secrets import config_reference

if TYPE_CHECKING:
    from tickwork.secrets import SecretResolver

KIND = "publish"
FIELDS = ("broker", "body", "exchange", "routing_key", "subject", "topic", "stream", "maxlen")
# The field that names where a message goes, per broker family.
DESTINATIONS = {"amqp": "exchange", "nats": "subject", "mqtt": "topic", "redis": "stream"}
FAMILY_NAMES = {"amqp": "RabbitMQ (AMQP)", "nats": "NATS", "mqtt": "MQTT", "redis": "Redis"}
MAX_NAME = 255
MAX_BODY_BYTES = 1024 * 1024
WHERE = "give one of exchange (RabbitMQ), subject (NATS), topic (MQTT) or stream (Redis)"


def _name(payload: dict[str, Any], key: str, *, empty_ok: bool = False,
          forbidden: str = "") -> str | None:
    value = payload.get(key)
    if value is None:
        return None
    field = f"payload.{key}"
    if not isinstance(value, str) or len(value) > MAX_NAME or (not value and not empty_ok):
        raise ValidationError(field, f"must be a string of {0 if empty_ok else 1} to "
                              f"{MAX_NAME} characters")
    bad = [c for c in value if c.isspace() or c == "\0" or c in forbidden]
    if bad:
        raise ValidationError(field, f"must not contain {bad[0]!r}")
    return value


def validate_payload(payload: object) -> dict[str, Any]:
    """The normalised payload, or ValidationError naming the field.

    Which broker the name stands for is known only with the settings: admission.py and the
    executor check that the destination fits it.
    """
    payload = payload_object(payload, FIELDS)
    broker = _name(payload, "broker")
    if broker is None:
        raise ValidationError("payload.broker", "is required: the name of a configured broker")
    out: dict[str, Any] = {"broker": broker}
    given = {
        "exchange": _name(payload, "exchange", empty_ok=True),
        "subject": _name(payload, "subject", forbidden="*>"),
        "topic": _name(payload, "topic", forbidden="+#"),
        "stream": _name(payload, "stream"),
    }
    chosen = [key for key, value in given.items() if value is not None]
    if not chosen:
        raise ValidationError("payload.exchange", f"a destination is required: {WHERE}")
    if len(chosen) > 1:
        raise ValidationError(f"payload.{chosen[1]}", f"give only one destination ({WHERE}); "
                              f"got {' and '.join(chosen)}")
    out[chosen[0]] = given[chosen[0]]
    routing_key = _name(payload, "routing_key", empty_ok=True)
    if routing_key is not None:
        if chosen[0] != "exchange":
            raise ValidationError("payload.routing_key", "goes with exchange (RabbitMQ) only")
        out["routing_key"] = routing_key
    maxlen = payload.get("maxlen")
    if maxlen is not None:
        if chosen[0] != "stream":
            raise ValidationError("payload.maxlen", "goes with stream (Redis) only")
        if not isinstance(maxlen, int) or isinstance(maxlen, bool) or maxlen < 1:
            raise ValidationError("payload.maxlen", "must be a whole number of at least 1")
        out["maxlen"] = maxlen
    body = payload.get("body")
    problem = json_problem(body)
    if problem is not None:
        raise ValidationError("payload.body", f"must be JSON ({problem})")
    if len(json.dumps(body)) > MAX_BODY_BYTES:
        raise ValidationError("payload.body", f"must be at most {MAX_BODY_BYTES} bytes as JSON")
    out["body"] = body
    return out


def configured(settings: ExecutorSettings) -> dict[str, str]:
    """The configured brokers: name -> URL (or ``$secret:NAME``)."""
    return dict(settings.brokers)


def check_broker(payload: dict[str, Any], settings: ExecutorSettings) -> None:
    """Raise ValidationError naming the field unless the payload's broker is configured and
    its destination is the one that broker takes (a secret URL's scheme is not known here)."""
    brokers = configured(settings)
    name = payload["broker"]
    url = brokers.get(name)
    if url is None:
        known = ", ".join(sorted(brokers)) or "none is configured (executors.brokers)"
        raise ValidationError("payload.broker", f"unknown broker {name!r}; known: {known}")
    family = broker_family(url)
    if family is None:  # $secret:NAME: its URL is read when a worker connects
        return
    want = DESTINATIONS[family]
    if want not in payload:
        raise ValidationError(f"payload.{want}", f"is required: broker {name!r} is "
                              f"{FAMILY_NAMES[family]}")


def check_settings(brokers: tuple[tuple[str, str], ...]) -> str | None:
    """Why the brokers setting cannot work, or None."""
    for name, url in brokers:
        if not name or len(name) > MAX_NAME or any(c.isspace() for c in name):
            return f"{name!r} is not a broker name (1 to {MAX_NAME} characters, no spaces)"
        if config_reference(url) is not None:
            continue
        family = broker_family(url)
        if family is None:
            scheme = url.partition("://")[0] if "://" in url else "no scheme"
            return (f"broker {name!r}: {scheme!r} is not a broker URL scheme (redis, rediss, "
                    "amqp, amqps, nats, tls, mqtt, mqtts)")
        try:
            host = urlsplit(url).hostname
        except ValueError:
            host = None
        if not host:
            return f"broker {name!r}: the URL has no host"
    return None


def message_for(ctx: ExecutionContext, body: object) -> Message:
    """The message of one attempt. When attempts are traced, the span's W3C trace context
    (``traceparent``, and ``tracestate`` or ``baggage`` when there are) rides along under its
    own names, as headers and as fields, so a consumer's spans join the attempt's trace."""
    meta = {
        "Idempotency-Key": ctx.idempotency_key,
        "Tickwork-Attempt": str(ctx.attempt),
        "Tickwork-Scheduled-At": rfc3339(ctx.scheduled_at),
        "Tickwork-Job-Id": ctx.job_id,
    }
    data = json.dumps(body, separators=(",", ":"))
    fields = {"body": data, "idempotency_key": ctx.idempotency_key,
              "scheduled_at": meta["Tickwork-Scheduled-At"], "attempt": meta["Tickwork-Attempt"],
              "job": ctx.job_id}
    for name, value in ctx.trace_headers.items():
        meta.setdefault(name, value)  # never over one of tickwork's own
        fields.setdefault(name, value)
    return Message(body=data.encode(), meta=meta, fields=fields)


class PublishExecutor:
    """Publishes ``publish`` jobs' messages, one pooled client per configured broker."""

    kind = KIND

    def __init__(self, settings: ExecutorSettings, secrets: SecretResolver | None = None
                 ) -> None:
        self._settings = settings
        self._secrets = secrets
        self._policy = OutboundPolicy(settings.outbound_allow)
        self._clients: dict[str, BrokerClient] = {}
        self._lock = asyncio.Lock()

    def client(self, name: str) -> BrokerClient | None:
        """The pooled client of broker ``name``, if one was opened (tests count connects)."""
        return self._clients.get(name)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    async def execute(self, ctx: ExecutionContext) -> Outcome:
        payload = checked_payload(validate_payload, ctx.payload)
        if isinstance(payload, Fail):
            return payload
        name = payload["broker"]
        where = f"broker {name!r}"
        try:
            client = await self._client_for(name)
            want = DESTINATIONS[client.family]
            if want not in payload:
                return Fail(f"{where} is {FAMILY_NAMES[client.family]}: payload.{want} is "
                            "required", retriable=False)
            acked = await client.publish(payload, message_for(ctx, payload["body"]),
                                         ctx.timeout_seconds)
        except BrokerRefused as exc:
            return Fail(self._short(f"{where}: {exc}"), retriable=False)
        except BrokerUnavailable as exc:
            return Fail(self._short(f"{where}: {exc}"))
        return Success(output=f"{where} acknowledged: {acked}")

    async def _client_for(self, name: str) -> BrokerClient:
        async with self._lock:
            client = self._clients.get(name)
            if client is not None:
                return client
            url = configured(self._settings).get(name)
            if url is None:
                raise BrokerRefused("not configured on this worker (executors.brokers)")
            secret = config_reference(url)
            if secret is not None:
                if self._secrets is None:
                    raise BrokerRefused(f"its URL is secret {secret!r}, but this worker has "
                                        "no secret store")
                try:
                    url = await self._secrets.get(secret)
                except TickworkError as exc:
                    raise BrokerRefused(f"reading secret {secret!r}: {exc}") from None
            client = self._clients[name] = open_client(url, self._policy)
            return client

    def _short(self, text: str) -> str:
        return cap_text(text, min(ERROR_LIMIT_BYTES, self._settings.output_limit_bytes))
