"""Commands from a NATS JetStream subject, read by a durable pull consumer.

Send one with ``nats pub <subject> '<JSON>'`` (a JetStream stream must take the subject; if
none does, one named after it is created, taking ``<subject>`` and ``<subject>.dead``). The
durable consumer is ``tickwork_<subject>`` (dots and wildcards as ``_``), so consumers on
many machines share the work; a message not acknowledged within ``lease_seconds`` is
delivered again. Dead letters are published to ``<subject>.dead`` (JetStream: stored) with
the original body and headers plus ``Tickwork-Error``; replies are plain NATS messages on
``reply_to`` (a request's inbox works).
"""

from __future__ import annotations

import re
from typing import Any

from tickwork.errors import StoreError
from tickwork.executors.brokers import NatsBroker
from tickwork.streams.sources import GROUP, READ_SECONDS, StreamSource

CONNECT_SECONDS = 10.0
NAK_DELAY_SECONDS = 1.0


def _token(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


class NatsSource(StreamSource):
    family = "nats"

    _broker: NatsBroker | None = None
    _client: Any = None
    _sub: Any = None

    @property
    def durable(self) -> str:
        return f"{GROUP}_{_token(self.config.source)}"

    async def _open(self) -> Any:
        if self._sub is not None and not self._client.is_closed:
            return self._sub
        await self.close()
        from nats.js.api import ConsumerConfig  # noqa: PLC0415  (the brokers extra)

        self._broker = NatsBroker(await self.url(), self.policy)
        client = await self._broker._connected(CONNECT_SECONDS)  # the guarded connect
        js = client.jetstream()
        stream = await self._stream_for(js, self.config.source, [
            self.config.source, self.config.dead])
        await self._stream_for(js, self.config.dead, [self.config.dead])
        self._sub = await js.pull_subscribe(
            self.config.source, durable=self.durable, stream=stream,
            config=ConsumerConfig(ack_wait=self.lease_seconds,
                                  max_ack_pending=max(self.batch * 4, 256)))
        self._client = client
        return self._sub

    @staticmethod
    async def _stream_for(js: Any, subject: str, subjects: list[str]) -> str:
        from nats.js.errors import NotFoundError  # noqa: PLC0415  (the brokers extra)

        try:
            return str(await js.find_stream_name_by_subject(subject))
        except NotFoundError:
            name = f"TICKWORK_{_token(subject).upper()}"
            await js.add_stream(name=name, subjects=subjects)
            return name

    async def consume_once(self) -> bool:
        import nats.errors  # noqa: PLC0415  (the brokers extra)

        sub = await self._open()
        try:
            messages = await sub.fetch(self.batch, timeout=READ_SECONDS)
        except nats.errors.TimeoutError:
            return False
        for index, message in enumerate(messages):
            try:
                await self._one(message)
            except StoreError:  # these come again soon, not after ack_wait
                for left in messages[index:]:
                    await left.nak(delay=NAK_DELAY_SECONDS)
                raise
        await self._client.flush()
        return len(messages) == self.batch

    async def _one(self, message: Any) -> None:
        meta = message.metadata  # the stream's sequence: the same on every delivery
        handled = await self.handler.handle(
            message.data, message_id=f"nats:{meta.stream}:{meta.sequence.stream}")
        if handled.error is not None:
            error = " ".join(handled.error.split())  # a header value is one line
            headers = {**(message.headers or {}), "Tickwork-Error": error,
                       "Tickwork-Source": self.config.source}
            await self._client.jetstream().publish(self.config.dead, message.data,
                                                   headers=headers)
        if handled.reply_to is not None:
            await self._client.publish(handled.reply_to, handled.reply)
            await self._client.flush()
        await message.ack_sync()

    async def close(self) -> None:
        broker, self._broker, self._client, self._sub = self._broker, None, None, None
        if broker is not None:
            await broker.close()
