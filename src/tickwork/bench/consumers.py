"""Consumers of the publish kind's messages, one per broker, for the bench and the fault suite.

Each sets up a destination of its own (a Redis stream, a RabbitMQ exchange and queue, a NATS
JetStream stream, an MQTT topic), counts what arrives as ``Execution`` records (the key is the
message's idempotency key, ``started`` the instant it arrived) and removes the destination when
closed. A consumer that loses its broker connects again and goes on where it was (Redis: after
the last entry it read), so a broker restart is something it rides out, not a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from tickwork.bench.record import Execution

log = logging.getLogger("tickwork.bench.consumers")

FAMILIES = {"redis": "redis", "rabbitmq": "amqp", "nats": "nats", "mqtt": "mqtt"}
DEFAULT_URLS = {
    "redis": "redis://127.0.0.1:6379/0",
    "rabbitmq": "amqp://guest:guest@127.0.0.1:5672/",
    "nats": "nats://127.0.0.1:4222",
    "mqtt": "mqtt://127.0.0.1:1883",
}
RETRY_SECONDS = 0.2  # a consumer's pause before it connects again: not a test's wait


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def execution(meta: Mapping[str, Any]) -> Execution | None:
    """The record of one message from its headers (or Redis fields); None if it has none."""
    key = meta.get("Idempotency-Key", meta.get("idempotency_key"))
    scheduled = meta.get("Tickwork-Scheduled-At", meta.get("scheduled_at"))
    attempt = meta.get("Tickwork-Attempt", meta.get("attempt", 1))
    if key is None or scheduled is None:
        return None
    at = datetime.fromisoformat(_text(scheduled).replace("Z", "+00:00")).timestamp()
    return Execution(_text(key), int(_text(attempt)), at, time.time(), 0)


class Consumer:
    """What every consumer shares: the records so far, taken with ``drain``."""

    destination_field = ""

    def __init__(self, url: str) -> None:
        self.url = url
        self.name = f"tw-bench-{uuid.uuid4().hex[:10]}"
        self.received = 0
        self._got: list[Execution] = []
        self._task: asyncio.Task[None] | None = None

    def destination(self) -> dict[str, Any]:
        """The publish payload's destination fields for this consumer."""
        return {self.destination_field: self.name}

    def _take(self, meta: Mapping[str, Any]) -> None:
        found = execution(meta)
        if found is not None:
            self.received += 1
            self._got.append(found)

    def drain(self) -> list[Execution]:
        got, self._got = self._got, []
        return got

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


class RedisConsumer(Consumer):
    destination_field = "stream"

    async def start(self) -> None:
        from redis.asyncio import Redis  # noqa: PLC0415  (the brokers extra)

        self._client = Redis.from_url(self.url, socket_connect_timeout=5)
        await self._client.ping()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        last = "0"
        while True:
            try:
                found: Any = await self._client.xread({self.name: last}, count=1000,
                                                      block=500)
            except Exception as exc:  # a restart: connect again and go on
                log.info("redis consumer: %s; connecting again", exc)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            for _stream, entries in found:
                for entry_id, fields in entries:
                    last = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
                    self._take({k.decode(): v for k, v in fields.items()})

    async def close(self) -> None:
        await super().close()
        with contextlib.suppress(Exception):  # the server may be gone (a fault test)
            await self._client.delete(self.name)
        await self._client.aclose()


class AmqpConsumer(Consumer):
    destination_field = "exchange"

    def destination(self) -> dict[str, Any]:
        return {"exchange": self.name, "routing_key": "bench"}

    async def start(self) -> None:
        import aiormq  # noqa: PLC0415  (the brokers extra)

        self._connection = await aiormq.connect(self.url)
        channel = await self._connection.channel()
        await channel.exchange_declare(self.name, exchange_type="topic", auto_delete=True)
        await channel.queue_declare(self.name, exclusive=True, auto_delete=True)
        await channel.queue_bind(self.name, self.name, routing_key="#")

        async def on_message(message: Any) -> None:
            self._take(message.header.properties.headers or {})

        await channel.basic_consume(self.name, on_message, no_ack=True)

    async def close(self) -> None:
        await self._connection.close()


class NatsConsumer(Consumer):
    """A JetStream stream of its own and a durable push consumer on it: what the stream
    acknowledged to a publisher is delivered even across a restart of the server (the
    consumer connects again; what it had not acked comes again after ``ACK_WAIT``)."""

    destination_field = "subject"
    ACK_WAIT = 2.0

    def __init__(self, url: str, *, reconnects: int = 3) -> None:
        super().__init__(url)
        self.reconnects = reconnects

    async def start(self) -> None:
        import nats  # noqa: PLC0415  (the brokers extra)
        from nats.js.api import ConsumerConfig, StreamConfig  # noqa: PLC0415

        parts = urlsplit(self.url)
        self._client = await nats.connect(
            self.url, user=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            connect_timeout=5, max_reconnect_attempts=self.reconnects, reconnect_time_wait=0.5,
            error_cb=_quiet)
        js = self._client.jetstream()
        await js.add_stream(StreamConfig(name=self.name, subjects=[self.name]))

        async def on_message(message: Any) -> None:
            self._take(message.headers or {})

        await js.subscribe(self.name, durable=self.name, cb=on_message,
                           config=ConsumerConfig(ack_wait=self.ACK_WAIT))

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._client.jetstream().delete_stream(self.name)
        await self._client.close()


async def _quiet(exc: Exception) -> None:
    """nats-py's error callback: a line, not its default traceback (the caller says why)."""
    log.info("nats consumer: %s: %s", type(exc).__name__, exc)


class MqttConsumer(Consumer):
    destination_field = "topic"

    async def start(self) -> None:
        import aiomqtt  # noqa: PLC0415  (the brokers extra)

        parts = urlsplit(self.url)
        self._client = aiomqtt.Client(
            parts.hostname or "127.0.0.1", parts.port or 1883,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            protocol=aiomqtt.ProtocolVersion.V5, max_queued_incoming_messages=0)
        await self._client.__aenter__()
        await self._client.subscribe(self.name, qos=1)
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self._client.messages:
            properties = getattr(message.properties, "UserProperty", None) or []
            meta = dict(properties)
            if not meta:  # an MQTT 3.1.1 envelope
                with contextlib.suppress(ValueError, TypeError, AttributeError):
                    meta = json.loads(message.payload)["tickwork"]
            self._take(meta)

    async def close(self) -> None:
        await super().close()
        with contextlib.suppress(Exception):
            await self._client.__aexit__(None, None, None)


CONSUMERS: dict[str, type[Consumer]] = {
    "redis": RedisConsumer, "rabbitmq": AmqpConsumer, "nats": NatsConsumer,
    "mqtt": MqttConsumer,
}


def open_consumer(broker: str, url: str | None = None) -> Consumer:
    """A consumer for ``broker`` (redis, rabbitmq, nats or mqtt) at ``url`` (default: the
    broker's usual local address)."""
    return CONSUMERS[broker](url or DEFAULT_URLS[broker])
