"""Commands from a RabbitMQ queue (declared durable), acknowledged one by one.

Send one by publishing the JSON command to the queue (the default exchange, routing key =
the queue's name). Up to ``batch`` messages are in flight; one not acknowledged when the
connection drops goes back to the queue. Dead letters go to the durable queue
``<queue>.dead``: the original body, its headers plus ``x-tickwork-error``; replies go to the
queue ``reply_to`` names (the command's, else the message's ``reply_to`` property), with the
message's ``correlation_id``. Both are published with confirms before the ack.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tickwork.executors.brokers import AmqpBroker, BrokerUnavailable
from tickwork.streams.sources import READ_SECONDS, StreamSource

CONNECT_SECONDS = 10.0


class AmqpSource(StreamSource):
    family = "amqp"

    _broker: AmqpBroker | None = None
    _channel: Any = None
    _inbox: asyncio.Queue[Any] | None = None

    async def _open(self) -> Any:
        if self._channel is not None and not self._channel.is_closed:
            return self._channel
        await self.close()
        self._broker = AmqpBroker(await self.url(), self.policy)
        channel = await self._broker._connected(CONNECT_SECONDS)  # the guarded connect
        await channel.basic_qos(prefetch_count=self.batch)
        for queue in (self.config.source, self.config.dead):
            await channel.queue_declare(queue, durable=True)
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        await channel.basic_consume(self.config.source, inbox.put, no_ack=False)
        self._channel, self._inbox = channel, inbox
        return channel

    async def consume_once(self) -> bool:
        channel = await self._open()
        assert self._inbox is not None
        try:
            first = await asyncio.wait_for(self._inbox.get(), READ_SECONDS)
        except TimeoutError:
            return False
        messages = [first]
        while len(messages) < self.batch and not self._inbox.empty():
            messages.append(self._inbox.get_nowait())
        for message in messages:
            await self._one(channel, message)
        return not self._inbox.empty()

    async def _one(self, channel: Any, message: Any) -> None:
        import aiormq  # noqa: PLC0415  (the brokers extra)

        props = message.header.properties
        identity = f"amqp:{self.config.source}:{props.message_id}" if props.message_id \
            else None  # without a message_id, a trigger delivered again runs again
        handled = await self.handler.handle(message.body, props.reply_to or None, identity)
        if handled.error is not None:
            headers = {**(props.headers or {}), "x-tickwork-error": handled.error,
                       "x-tickwork-source": self.config.source}
            await self._publish(channel, self.config.dead, message.body,
                                aiormq.spec.Basic.Properties(
                                    headers=headers, delivery_mode=2,
                                    content_type=props.content_type,
                                    message_id=props.message_id))
        if handled.reply_to is not None:
            await self._publish(channel, handled.reply_to, handled.reply,
                                aiormq.spec.Basic.Properties(
                                    content_type="application/json", delivery_mode=2,
                                    correlation_id=props.correlation_id))
        await channel.basic_ack(message.delivery_tag)

    async def _publish(self, channel: Any, queue: str, body: bytes, properties: Any) -> None:
        from pamqp.commands import Basic  # noqa: PLC0415  (aiormq's own dependency)

        confirm = await channel.basic_publish(body, exchange="", routing_key=queue,
                                              properties=properties)
        if not isinstance(confirm, Basic.Ack):
            raise BrokerUnavailable(f"the broker did not confirm a message to {queue!r}")

    async def close(self) -> None:
        broker, self._broker, self._channel, self._inbox = self._broker, None, None, None
        if broker is not None:
            with contextlib.suppress(Exception):  # already gone: nothing left to close
                await broker.close()
