"""A TCP proxy that can become a blackhole: a network partition between one process and Redis.

    proxy = await BlackholeProxy(redis.port).start()
    worker = run.worker("w1", redis=proxy.url)       # only this process goes through it
    proxy.blackhole()    # nothing forwarded either way; every socket stays open
    proxy.heal()         # new connections are forwarded again

Forwarding is byte for byte in both directions. While blackholed, what arrives on either side
is read and dropped (a partition that drops packets: no reply, no reset, no FIN), and a new
connection is accepted but never connected through, so a client notices only by its own
timeouts. A connection that was blackholed never forwards again: at ``heal()`` it is closed, as
a real partition's connections are eventually reset, and the client reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

CHUNK = 65536


@dataclass(eq=False)
class _Link:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    cut: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def close(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()


class BlackholeProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.blackholed = False
        self.forwarded = 0  # bytes passed on
        self.dropped = 0  # bytes read while blackholed and thrown away
        self.accepted = 0
        self._links: set[_Link] = set()
        self._server: asyncio.Server | None = None
        self._closed_one = asyncio.Event()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def open_connections(self) -> int:
        return len(self._links)

    async def until_open(self, n: int, within: float = 5.0) -> None:
        """Wait until at most ``n`` connections are open (clients closed theirs)."""
        async with asyncio.timeout(within):
            while len(self._links) > n:
                self._closed_one.clear()
                await self._closed_one.wait()

    async def start(self) -> BlackholeProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def blackhole(self) -> float:
        """Stop forwarding in both directions, for every open and every new connection;
        keep every socket open. Returns the instant."""
        at = time.time()
        self.blackholed = True
        for link in self._links:
            link.cut = True
        return at

    def heal(self) -> float:
        """Forward new connections again; close the ones that were blackholed. Returns the
        instant."""
        at = time.time()
        self.blackholed = False
        for link in [link for link in self._links if link.cut]:
            self._drop(link)
        return at

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [t for link in self._links for t in link.tasks]
        for link in list(self._links):
            self._drop(link)
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    def _drop(self, link: _Link) -> None:
        self._links.discard(link)
        self._closed_one.set()
        link.close()
        for task in link.tasks:
            if task is not asyncio.current_task():
                task.cancel()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        link = _Link(writer, cut=self.blackholed)
        self._links.add(link)
        try:
            if not link.cut:
                # Blackholed while connecting: the pumps see ``cut`` and forward nothing.
                up_reader, link.upstream = await asyncio.open_connection(*self.upstream)
                link.tasks.append(asyncio.create_task(self._pump(link, up_reader, writer)))
            link.tasks.append(asyncio.create_task(self._pump(link, reader, link.upstream)))
            await asyncio.gather(*link.tasks, return_exceptions=True)
        except OSError:
            pass  # the upstream refused: the client sees its connection closed
        finally:
            if link in self._links:
                self._drop(link)

    async def _pump(self, link: _Link, source: asyncio.StreamReader,
                    target: asyncio.StreamWriter | None) -> None:
        """Copy ``source`` to ``target`` until either side closes; while the link is cut,
        read and drop. An end of stream on a cut link is not passed on either."""
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await source.read(CHUNK):
                if link.cut or target is None:
                    self.dropped += len(data)
                    continue
                target.write(data)
                self.forwarded += len(data)
                await target.drain()
        if link.cut:
            await asyncio.Event().wait()  # the peer's FIN is lost too; closed at heal()
        self._drop(link)
