"""``tickwork bench http``: the HTTP executor's client against the alternatives, measured.

A minimal HTTP/1.1 server runs in a process of its own on 127.0.0.1 (so the client's CPU is
measured alone) and answers every POST with 200 and a small JSON body; it counts the POSTs it
receives. Each client then sends N POST requests with a small JSON body at concurrency C over
one pool of kept-alive connections, as the executor does, after a warm-up that opens them.

Figures per client: requests a second, CPU seconds of this process per 1,000 requests
(``time.process_time``: the client's cost, which moves much less with the machine's load than
the rate does), p50/p99 latency, errors, and how many requests the server received. Clients:
``aiohttp`` (the executor's client), ``httpx`` (when installed) and ``executor``: tickwork's
``HttpExecutor`` end to end (outbound guard on, 127.0.0.1 allowed, no signing), so its own cost
over the raw client shows. A client that is not installed is reported as skipped.

Run as a module, this file is the server: it prints its port and serves until its stdin closes.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import importlib.util
import json
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork.bench import cpu
from tickwork.bench.progress import Progress

CLIENTS = ("aiohttp", "httpx", "executor")
BODY_OBJECT = {"event": "tickwork.bench", "job": "nightly-report", "attempt": 1}
BODY = json.dumps(BODY_OBJECT).encode()
HEADERS = {"Content-Type": "application/json"}
REQUEST_TIMEOUT = 30.0
MAX_WARMUP = 1000

Send = Callable[[int], Awaitable[str | None]]  # request number -> None, or what went wrong


# -- the server (its own process) ----------------------------------------------------------

REPLY = b'{"ok":true}'
OK = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
      + str(len(REPLY)).encode() + b"\r\n\r\n" + REPLY)
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
NO_CHUNKS = b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class _Server(asyncio.Protocol):
    """HTTP/1.1 keep-alive with Content-Length bodies: all the clients measured send."""

    received = 0  # POSTs, all connections together
    connections = 0  # accepted so far

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        _Server.connections += 1

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
            method, _, rest = lines[0].partition(" ")
            target = rest.partition(" ")[0]
            length, close = 0, False
            for line in lines[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                if name == "content-length":
                    length = int(value)
                elif name == "transfer-encoding":
                    self.transport.write(NO_CHUNKS)
                    self.transport.close()
                    return
                elif name == "connection":
                    close = value.strip().lower() == "close"
            if len(self.buffer) < end + 4 + length:
                return  # the rest of the body is still on its way
            del self.buffer[:end + 4 + length]
            if method == "POST":
                _Server.received += 1
                self.transport.write(OK)
            elif method == "GET" and target == "/stats":
                body = json.dumps({"received": _Server.received,
                                   "connections": _Server.connections}).encode()
                self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: "
                                     + str(len(body)).encode() + b"\r\n\r\n" + body)
            else:
                self.transport.write(NOT_FOUND)
            if close:
                self.transport.close()
                return


async def serve() -> None:
    """Serve on 127.0.0.1 (a free port, printed first) until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the bench, which closes stdin
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Server, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    await loop.run_in_executor(None, sys.stdin.buffer.read)
    server.close()


@asynccontextmanager
async def server_process() -> AsyncIterator[tuple[int, int]]:
    """The server in a child process: (port, pid)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tickwork.bench.http_clients", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not line.strip().isdigit():
            raise RuntimeError("the bench's HTTP server did not start")
        yield int(line), proc.pid
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def server_stats(port: int) -> tuple[int, int]:
    """POSTs received and connections accepted so far (this one included), asked over a
    connection of its own."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    reply = await reader.read()
    writer.close()
    await writer.wait_closed()
    stats = json.loads(reply.partition(b"\r\n\r\n")[2])
    return int(stats["received"]), int(stats["connections"])


# -- the clients -----------------------------------------------------------------------------

@asynccontextmanager
async def _aiohttp(url: str, concurrency: int) -> AsyncIterator[Send]:
    import aiohttp  # noqa: PLC0415  (each client is loaded only when measured)

    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=concurrency), trust_env=False,
        timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
    ) as session:
        async def send(_: int) -> str | None:
            async with session.post(url, data=BODY, headers=HEADERS) as resp:
                await resp.read()
                return None if resp.status == 200 else f"HTTP {resp.status}"

        yield send


@asynccontextmanager
async def _httpx(url: str, concurrency: int) -> AsyncIterator[Send]:
    import httpx  # noqa: PLC0415

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, trust_env=False,
                                 timeout=REQUEST_TIMEOUT) as client:
        async def send(_: int) -> str | None:
            resp = await client.post(url, content=BODY, headers=HEADERS)
            return None if resp.status_code == 200 else f"HTTP {resp.status_code}"

        yield send


@asynccontextmanager
async def _executor(url: str, concurrency: int) -> AsyncIterator[Send]:
    from tickwork.executors.base import ExecutionContext, ExecutorSettings  # noqa: PLC0415
    from tickwork.executors.http import HttpExecutor  # noqa: PLC0415
    from tickwork.outcomes import Success  # noqa: PLC0415

    executor = HttpExecutor(ExecutorSettings(outbound_allow=("127.0.0.1",),
                                             http_max_connections=max(concurrency, 1000)))
    payload = {"method": "POST", "url": url, "body": BODY_OBJECT}
    scheduled = datetime.now(UTC)

    async def send(n: int) -> str | None:
        # A payload of its own per request, as each one-off job has: the executor's memo of
        # validated payloads (which a recurring job's executions share) does not help here.
        outcome = await executor.execute(ExecutionContext(
            job_id="bench-http", job_name="bench-http", kind="http", payload={**payload},
            scheduled_at=scheduled, attempt=1, max_attempts=1, idempotency_key=f"bench-{n}",
            deadline=scheduled + timedelta(hours=1), timeout_seconds=REQUEST_TIMEOUT))
        return None if isinstance(outcome, Success) else str(getattr(outcome, "error", outcome))

    try:
        yield send
    finally:
        await executor.close()


FACTORIES: dict[str, Callable[[str, int], AbstractAsyncContextManager[Send]]] = {
    "aiohttp": _aiohttp, "httpx": _httpx, "executor": _executor}
DESCRIPTIONS = {"aiohttp": "aiohttp.ClientSession", "httpx": "httpx.AsyncClient",
                "executor": "tickwork HttpExecutor (aiohttp)"}


def _version(client: str) -> str | None:
    """The installed version of the client's package, or None when it is not installed."""
    package = "aiohttp" if client == "executor" else client
    if importlib.util.find_spec(package) is None:
        return None
    return importlib.metadata.version(package)


# -- the measurement -------------------------------------------------------------------------

class _Tally:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0
        self.first_error: str | None = None


async def _drive(send: Send, first: int, total: int, concurrency: int,
                 progress: Progress | None) -> _Tally:
    """``total`` requests through ``concurrency`` loops that each wait for their reply."""
    tally = _Tally()
    issued = 0
    step = max(total // 200, 1)
    clock = time.perf_counter

    async def loop() -> None:
        nonlocal issued
        while issued < total:
            n = first + issued
            issued += 1
            started = clock()
            try:
                problem = await send(n)
            except Exception as exc:  # every failure is counted; none stops the run
                problem = f"{type(exc).__name__}: {exc}"
            tally.latencies.append(clock() - started)
            if problem is not None:
                tally.errors += 1
                tally.first_error = tally.first_error or problem[:300]
            done = len(tally.latencies)
            if progress is not None and done % step == 0:
                progress.update(done, f"errors {tally.errors}" if tally.errors else "")

    await asyncio.gather(*(loop() for _ in range(min(concurrency, total))))
    return tally


def _percentile(ordered: Sequence[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(client: str, *, port: int, server_pid: int, requests: int, concurrency: int,
                  quiet: bool) -> dict[str, Any]:
    """One client's figures, or the reason it was skipped."""
    version = _version(client)
    row: dict[str, Any] = {"client": client, "description": DESCRIPTIONS[client],
                           "version": version}
    if version is None:
        return {**row, "skipped": "not installed"}
    url = f"http://127.0.0.1:{port}/hook"
    warmup = min(MAX_WARMUP, max(2 * concurrency, requests // 20))
    progress = Progress(f"http {client:<8}", requests, enabled=not quiet)
    async with FACTORIES[client](url, concurrency) as send:
        await _drive(send, 0, warmup, concurrency, None)  # opens the connections
        gc.collect()
        before = await server_stats(port)
        server_cpu = cpu.cpu_seconds(server_pid)
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        tally = await _drive(send, warmup, requests, concurrency, progress)
        wall = time.perf_counter() - wall_start
        spent = time.process_time() - cpu_start
        server_after = cpu.cpu_seconds(server_pid)
        after = await server_stats(port)
    progress.finish(len(tally.latencies), f"{requests / wall:,.0f} req/s")
    ordered = sorted(tally.latencies)
    return {
        **row,
        "requests": requests,
        "seconds": round(wall, 3),
        "requests_per_second": round(requests / wall, 1),
        "cpu_ms_per_1000": round(spent / requests * 1_000_000, 1),
        "latency_ms": {"p50": round(_percentile(ordered, 0.50) * 1000, 2),
                       "p99": round(_percentile(ordered, 0.99) * 1000, 2)},
        "errors": tally.errors,
        "first_error": tally.first_error,
        "server_received": after[0] - before[0],
        # connections opened during the measured requests (the stats connection not counted):
        # 0 when the pool kept the warm-up's connections alive
        "new_connections": after[1] - before[1] - 1,
        "server_cpu_ms_per_1000": None if server_cpu is None or server_after is None
        else round((server_after - server_cpu) / requests * 1_000_000, 1),
    }


async def run_http(*, requests: int, concurrency: int, clients: Sequence[str],
                   quiet: bool) -> dict[str, Any]:
    """Every client in turn against one server process."""
    progress = Progress("http", 1, enabled=not quiet)
    rows = []
    async with server_process() as (port, pid):
        progress.say(f"server on 127.0.0.1:{port} (pid {pid}); {requests:,} POSTs each at "
                     f"concurrency {concurrency}")
        for client in clients:
            rows.append(await measure(client, port=port, server_pid=pid, requests=requests,
                                      concurrency=concurrency, quiet=quiet))
            if "skipped" in rows[-1]:
                progress.say(f"http {client}: skipped ({rows[-1]['skipped']})")
    measured = [r for r in rows if "skipped" not in r]
    return {
        "workload": "http",
        "requests": requests,
        "concurrency": concurrency,
        "body_bytes": len(BODY),
        "clients": rows,
        "ok": all(r["errors"] == 0 and r["server_received"] == requests for r in measured),
    }


def table(result: dict[str, Any]) -> str:
    """The figures as a table, one client a line."""
    head = ("client", "version", "req/s", "CPU ms/1k req", "p50 ms", "p99 ms", "errors",
            "server saw", "new conns", "server CPU ms/1k")
    lines = [head]
    for r in result["clients"]:
        if "skipped" in r:
            lines.append((r["description"], "-", f"skipped: {r['skipped']}", *("",) * 7))
            continue
        server_cpu = r["server_cpu_ms_per_1000"]
        lines.append((r["description"], r["version"], f"{r['requests_per_second']:,.0f}",
                      f"{r['cpu_ms_per_1000']:,.1f}", f"{r['latency_ms']['p50']:.2f}",
                      f"{r['latency_ms']['p99']:.2f}", f"{r['errors']:,}",
                      f"{r['server_received']:,}", f"{r['new_connections']:,}",
                      "-" if server_cpu is None else f"{server_cpu:,.1f}"))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = [f"HTTP clients: {result['requests']:,} POSTs of {result['body_bytes']} bytes each, "
            f"concurrency {result['concurrency']}, server on 127.0.0.1 in its own process", ""]
    for line in lines:
        text.append("  ".join([line[0].ljust(widths[0])]
                              + [cell.rjust(w) for cell, w in zip(line[1:], widths[1:],
                                                                  strict=True)]).rstrip())
    errors = [f"{r['client']}: {r['first_error']}" for r in result["clients"]
              if r.get("first_error")]
    return "\n".join(text + [f"first error, {e}" for e in errors]) + "\n"


if __name__ == "__main__":
    asyncio.run(serve())
