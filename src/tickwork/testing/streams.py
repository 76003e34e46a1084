"""The real brokers as a test sends job commands on them and reads replies and dead letters.

``Commands.open(family)`` gives a helper on the family's test server (redis, amqp, nats)
with names of its own: ``source`` (where commands go), ``dead`` and ``reply`` (where a
consumer writes). ``send`` puts one raw command body; ``replies`` and ``dead_letters`` read
what arrived so far, as ``(body, meta)`` pairs (meta: Redis fields, AMQP headers or NATS
headers, as text). ``close`` removes what the test made.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from tickwork.testing.brokers import require, unique

Read = list[tuple[bytes, dict[str, str]]]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Commands:
    family = ""

    def __init__(self, url: str) -> None:
        self.url = url
        name = unique()
        self.source = f"{name}.commands"
        self.dead = f"{self.source}.dead"
        self.reply = f"{name}.replies"

    @classmethod
    async def open(cls, family: str) -> Commands:
        helper = {"redis": RedisCommands, "amqp": AmqpCommands, "nats": NatsCommands}[family]
        made = helper(require(family))
        await made.start()
        return made

    async def start(self) -> None: ...
    async def send(self, body: bytes | dict[str, Any]) -> None: ...
    async def replies(self) -> Read:
        raise NotImplementedError

    async def dead_letters(self) -> Read:
        raise NotImplementedError

    async def close(self) -> None: ...


def encode(body: bytes | dict[str, Any]) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


class RedisCommands(Commands):
    family = "redis"

    async def start(self) -> None:
        from redis.asyncio import Redis  # noqa: PLC0415  (the brokers extra)

        self.redis: Any = Redis.from_url(self.url)

    async def send(self, body: bytes | dict[str, Any]) -> None:
        await self.redis.xadd(self.source, {"command": encode(body)})

    async def _read(self, stream: str, field: str) -> Read:
        entries = await self.redis.xrange(stream)
        return [(fields.get(field.encode(), b""), {_text(k): _text(v) for k, v in fields.items()
                                                   if k != field.encode()})
                for _, fields in entries]

    async def replies(self) -> Read:
        return await self._read(self.reply, "reply")

    async def dead_letters(self) -> Read:
        return await self._read(self.dead, "command")

    async def close(self) -> None:
        await self.redis.delete(self.source, self.dead, self.reply)
        await self.redis.aclose()


class AmqpCommands(Commands):
    family = "amqp"

    async def start(self) -> None:
        import aiormq  # noqa: PLC0415  (the brokers extra)

        self._seen: dict[str, Read] = {}
        self.connection = await aiormq.connect(self.url)
        self.channel = await self.connection.channel()
        for queue in (self.source, self.dead, self.reply):
            await self.channel.queue_declare(queue, durable=True)

    async def send(self, body: bytes | dict[str, Any]) -> None:
        import aiormq  # noqa: PLC0415  (the brokers extra)

        await self.channel.basic_publish(encode(body), routing_key=self.source,
                                         properties=aiormq.spec.Basic.Properties(
                                             message_id=uuid.uuid4().hex))

    async def _read(self, queue: str) -> Read:
        """Everything that arrived on ``queue`` so far (taken off it, and kept here)."""
        found = self._seen.setdefault(queue, [])
        while True:
            got = await self.channel.basic_get(queue, no_ack=True)
            if got.delivery_tag is None:
                return list(found)
            headers = got.header.properties.headers or {}
            found.append((got.body, {k: _text(v) for k, v in headers.items()}))

    async def replies(self) -> Read:
        return await self._read(self.reply)

    async def dead_letters(self) -> Read:
        return await self._read(self.dead)

    async def close(self) -> None:
        for queue in (self.source, self.dead, self.reply):
            await self.channel.queue_delete(queue)
        await self.connection.close()


class NatsCommands(Commands):
    family = "nats"

    async def start(self) -> None:
        import nats  # noqa: PLC0415  (the brokers extra)

        self.nc = await nats.connect(self.url)
        self.js = self.nc.jetstream()
        self.stream = f"TW_TEST_{self.source.replace('.', '_').replace('-', '_').upper()}"
        await self.js.add_stream(name=self.stream, subjects=[self.source, self.dead])
        self._replies: Read = []

        async def keep(msg: Any) -> None:
            self._replies.append((msg.data, dict(msg.headers or {})))

        self._reply_sub = await self.nc.subscribe(self.reply, cb=keep)

    async def send(self, body: bytes | dict[str, Any]) -> None:
        await self.js.publish(self.source, encode(body))

    async def replies(self) -> Read:
        await self.nc.flush()
        return list(self._replies)

    async def dead_letters(self) -> Read:
        from nats.js.errors import NotFoundError  # noqa: PLC0415  (the brokers extra)

        found: Read = []
        info = await self.js.stream_info(self.stream)
        for seq in range(max(info.state.first_seq, 1), info.state.last_seq + 1):
            try:
                msg = await self.js.get_msg(self.stream, seq)
            except NotFoundError:  # a deleted sequence number
                continue
            if msg.subject == self.dead:
                found.append((msg.data or b"", dict(msg.headers or {})))
        return found

    async def close(self) -> None:
        await self._reply_sub.unsubscribe()
        await self.js.delete_stream(self.stream)
        await self.nc.close()


async def until(check: Callable[[], Awaitable[bool]], step: Callable[[], Awaitable[object]],
                seconds: float = 10.0) -> None:
    """Run ``step`` until ``check`` holds, for at most ``seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"not done within {seconds}s")
        await step()
