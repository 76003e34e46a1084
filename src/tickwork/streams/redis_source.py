"""Commands from a Redis stream, read by the consumer group ``tickwork``.

Send one with ``XADD <stream> * command '<JSON>'``. Each consumer first reads back what it
was delivered and did not acknowledge (after a restart under the same name), then new
entries; every ``lease_seconds / 2`` it takes over entries another consumer left
unacknowledged for ``lease_seconds`` (XAUTOCLAIM). Dead letters are ``XADD <stream>.dead``
with the entry's fields plus ``error``; replies are ``XADD <reply_to> * reply '<JSON>'``.
"""

from __future__ import annotations

import time
from typing import Any

from tickwork.executors.brokers import RedisBroker
from tickwork.streams.sources import GROUP, READ_SECONDS, StreamSource

FIELD = b"command"


class RedisSource(StreamSource):
    family = "redis"

    _broker: RedisBroker | None = None
    _pending = True  # read back our own unacknowledged entries before new ones
    _claimed_at = 0.0

    async def _client(self) -> Any:
        if self._broker is None:
            self._broker = RedisBroker(await self.url(), self.policy)
            self._pending = True
        client = await self._broker._connected()  # the guarded connect
        if self._claimed_at == 0.0:
            await self._create_group(client)
        return client

    async def _create_group(self, client: Any) -> None:
        from redis.exceptions import ResponseError  # noqa: PLC0415  (the brokers extra)

        try:  # from the start: commands sent before the first consumer are read too
            await client.xgroup_create(self.config.source, GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._claimed_at = time.monotonic()

    async def _read(self, client: Any) -> list[tuple[bytes, dict[bytes, bytes]]]:
        stream = self.config.source
        if self._pending:
            got = await client.xreadgroup(GROUP, self.consumer, {stream: "0"}, count=self.batch)
            entries = got[0][1] if got else []
            if entries:
                return list(entries)
            self._pending = False
        if time.monotonic() - self._claimed_at >= self.lease_seconds / 2:
            self._claimed_at = time.monotonic()
            claimed = await client.xautoclaim(stream, GROUP, self.consumer,
                                              int(self.lease_seconds * 1000), "0-0",
                                              count=self.batch)
            if claimed[1]:
                return list(claimed[1])
        got = await client.xreadgroup(GROUP, self.consumer, {stream: ">"}, count=self.batch,
                                      block=int(READ_SECONDS * 1000))
        return list(got[0][1]) if got else []

    async def consume_once(self) -> bool:
        client = await self._client()
        entries = await self._read(client)
        for entry_id, fields in entries:
            await self._one(client, entry_id, fields or {})
        return len(entries) == self.batch

    async def _one(self, client: Any, entry_id: bytes, fields: dict[bytes, bytes]) -> None:
        if not fields:  # trimmed away while pending: nothing left to apply
            await client.xack(self.config.source, GROUP, entry_id)
            return
        body = fields.get(FIELD)
        if body is None:
            handled = self.handler.refused(
                f"a stream entry holds its command in field {FIELD.decode()!r}; this one has "
                + ", ".join(repr(k.decode(errors="replace")) for k in fields))
        else:
            handled = await self.handler.handle(
                body, message_id=f"redis:{self.config.source}:{entry_id.decode()}")
        if handled.error is not None:
            await client.xadd(self.config.dead, {
                **fields, b"error": handled.error.encode(), b"entry": entry_id,
                b"source": self.config.source.encode()})
        if handled.reply_to is not None:
            await client.xadd(handled.reply_to, {b"reply": handled.reply})
        await client.xack(self.config.source, GROUP, entry_id)

    async def close(self) -> None:
        broker, self._broker = self._broker, None
        self._claimed_at = 0.0  # the group is made again if the stream went away
        if broker is not None:
            await broker.close()
