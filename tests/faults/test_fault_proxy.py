"""The blackhole proxy judged on its own: it forwards both ways, then drops everything in both
directions while keeping every socket open, and forwards new connections again once healed.
Against an echo server (bytes exactly), and against a private redis-server through tickwork's
own Redis client (a cut is noticed within the socket timeout, as DispatchUnavailable).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tickwork.drivers.dispatch import EntryReadParams
from tickwork.drivers.redis.dispatch import RedisDispatch
from tickwork.errors import DispatchUnavailable
from tickwork.testing.faults.proxy import BlackholeProxy
from tickwork.testing.faults.redisserver import PrivateRedis

pytestmark = pytest.mark.timeout(30)
QUIET = 0.3  # how long a read must stay unanswered to count as dropped


class Echo:
    """Echoes every byte back, and keeps what it received."""

    def __init__(self) -> None:
        self.received = b""
        self.connections = 0
        self.port = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> Echo:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self.server.sockets[0].getsockname()[1])
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        while data := await reader.read(4096):
            self.received += data
            writer.write(data)
            await writer.drain()
        writer.close()


@pytest.fixture
async def echo_proxy() -> AsyncIterator[tuple[Echo, BlackholeProxy]]:
    echo = await Echo().start()
    proxy = await BlackholeProxy(echo.port).start()
    try:
        yield echo, proxy
    finally:
        await proxy.close()
        assert echo.server is not None
        echo.server.close()


async def roundtrip(proxy: BlackholeProxy, data: bytes
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(data)
    await writer.drain()
    return reader, writer, await asyncio.wait_for(reader.readexactly(len(data)), 5)


async def unanswered(reader: asyncio.StreamReader) -> bool:
    """Nothing arrives, not even an end of stream, within QUIET seconds."""
    try:
        await asyncio.wait_for(reader.read(1), QUIET)
    except TimeoutError:
        return True
    return False


async def test_it_forwards_then_drops_both_ways_keeping_sockets_open(
        echo_proxy: tuple[Echo, BlackholeProxy]) -> None:
    echo, proxy = echo_proxy
    reader, writer, back = await roundtrip(proxy, b"ping")
    assert (back, echo.received) == (b"ping", b"ping")

    proxy.blackhole()
    writer.write(b"lost")
    await writer.drain()
    assert await unanswered(reader), "no reply and no end of stream while blackholed"
    assert echo.received == b"ping", "nothing reached the server"
    new_reader, new_writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    new_writer.write(b"also lost")
    await new_writer.drain()
    assert await unanswered(new_reader), "a new connection is accepted, never answered"
    assert (echo.received, echo.connections) == (b"ping", 1)
    assert proxy.open_connections == 2
    assert proxy.dropped >= len(b"lostalso lost")

    proxy.heal()
    assert await asyncio.wait_for(reader.read(1), 5) == b"", "blackholed links close at heal"
    assert await asyncio.wait_for(new_reader.read(1), 5) == b""
    _, healed_writer, back = await roundtrip(proxy, b"again")
    assert back == b"again"
    assert echo.received == b"pingagain", "what was dropped stays dropped"
    for w in (writer, new_writer, healed_writer):
        w.close()


async def test_the_client_closing_a_forwarded_link_closes_the_upstream_side(
        echo_proxy: tuple[Echo, BlackholeProxy]) -> None:
    echo, proxy = echo_proxy
    reader, writer, _ = await roundtrip(proxy, b"x")
    writer.close()
    await writer.wait_closed()
    await asyncio.wait_for(reader.read(), 5)
    await proxy.until_open(0)  # the proxy passed the end of stream on and let go of both
    assert echo.connections == 1


async def test_a_redis_client_behind_the_blackhole_fails_within_its_socket_timeout() -> None:
    server = await PrivateRedis().start()
    proxy = await BlackholeProxy(server.port).start()
    dispatch = RedisDispatch.from_url(proxy.url)
    try:
        assert (await dispatch.health()).ok
        proxy.blackhole()
        began = time.monotonic()
        with pytest.raises(DispatchUnavailable):
            await dispatch.entry_read(EntryReadParams(queue="q", consumer="c", count=1,
                                                      block_ms=1000))
        took = time.monotonic() - began
        assert took < 3.0, f"the read gave up after {took:.2f}s, past its 2 s socket timeout"
        assert not (await dispatch.health()).ok, "new connections are blackholed too"
        proxy.heal()
        assert (await dispatch.health()).ok, "a healed proxy forwards new connections"
    finally:
        await dispatch.close()
        await proxy.close()
        await server.kill()
