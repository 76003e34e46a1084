"""The SSRF guard: refused addresses are never connected to, whatever form the URL takes.

A raw TCP server on 127.0.0.1 counts every connection it accepts; each refusal test ends with
that count at zero, and a positive control shows the counter does see a connection.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from tickwork.config import load_settings
from tickwork.errors import ConfigError
from tickwork.executors import ExecutorSettings, build_executors
from tickwork.executors.http import HttpExecutor
from tickwork.executors.outbound import OutboundClient
from tickwork.executors.ssrf import OutboundPolicy, parse_ip_literal, refusal_reason
from tickwork.outcomes import Fail, Success
from tickwork.testing.jobs import make_context

HINT = "allow it with outbound_allow"


@dataclass
class Recorder:
    port: int
    connections: int = 0
    connected: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def recorder() -> AsyncIterator[Recorder]:
    """Answers 200 to anything; counts connections."""
    state = Recorder(port=0)

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        state.connected.set()
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    async with server:
        yield state


class FakeDNS(AbstractResolver):
    """Names to addresses, below the guard: what a hostile DNS server could answer."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        self.asked.append(host)
        if host not in self.names:
            raise OSError(f"no such host {host}")
        addr = ipaddress.ip_address(self.names[host])
        fam = socket.AF_INET if addr.version == 4 else socket.AF_INET6
        return [{"hostname": host, "host": str(addr), "port": port, "family": fam, "proto": 0,
                 "flags": socket.AI_NUMERICHOST}]

    async def close(self) -> None:
        pass


def executor(dns: dict[str, str] | None = None, allow: tuple[str, ...] = ()) -> HttpExecutor:
    settings = ExecutorSettings(outbound_allow=allow)
    client = OutboundClient(settings, resolver=FakeDNS(dns) if dns is not None else None)
    return HttpExecutor(settings, client=client)


async def run(ex: HttpExecutor, url: str, **payload: Any) -> Any:
    try:
        return await asyncio.wait_for(ex.execute(make_context("http", {"url": url, **payload})),
                                      10)
    finally:
        await ex.close()


# --- nothing refused is connected to ------------------------------------------------------


async def test_the_recorder_sees_an_allowed_connection(recorder: Recorder) -> None:
    outcome = await run(executor(allow=("127.0.0.1",)), f"http://127.0.0.1:{recorder.port}/")
    assert outcome == Success(output="HTTP 200\nok")
    assert recorder.connections == 1


@pytest.mark.parametrize("host", [
    "127.0.0.1", "localhost", "0x7f000001", "2130706433", "127.1", "0177.0.0.1",
    "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "127.0.0.1.", "LOCALHOST",
])
async def test_loopback_in_any_form_is_refused(recorder: Recorder, host: str) -> None:
    url = f"http://{host}:{recorder.port}/"
    outcome = await run(executor(), url)
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert "refused to connect to " in outcome.error
    assert "loopback" in outcome.error
    assert outcome.error.endswith(HINT)
    assert recorder.connections == 0


async def test_the_message_names_the_address_and_how_to_allow_it(recorder: Recorder) -> None:
    url = f"http://127.0.0.1:{recorder.port}/x"
    outcome = await run(executor(), url)
    assert outcome == Fail(f"GET {url}: refused to connect to 127.0.0.1 (loopback); {HINT}",
                           retriable=False)
    assert recorder.connections == 0


@pytest.mark.parametrize(("name", "address", "reason"), [
    ("internal.test", "127.0.0.1", "loopback"),
    ("mapped.test", "::ffff:127.0.0.1", "loopback, as 127.0.0.1 inside an IPv6 address"),
    ("nat64.test", "64:ff9b::7f00:1", "loopback, as 127.0.0.1 inside an IPv6 address"),
    ("sixtofour.test", "2002:7f00:1::1", "loopback, as 127.0.0.1 inside an IPv6 address"),
    ("metadata.test", "169.254.169.254", "cloud metadata"),
    ("db.test", "10.1.2.3", "private"),
])
async def test_a_name_resolving_to_a_refused_address_is_refused(
        recorder: Recorder, name: str, address: str, reason: str) -> None:
    dns = {name: address}
    outcome = await run(executor(dns), f"http://{name}:{recorder.port}/")
    assert outcome == Fail(
        f"GET http://{name}:{recorder.port}/: refused to connect to "
        f"{ipaddress.ip_address(address)} "
        f"(the address of {name}) ({reason}); {HINT}", retriable=False)
    assert recorder.connections == 0


async def test_metadata_literal_is_refused_without_a_connection() -> None:
    outcome = await run(executor(), "http://169.254.169.254/latest/meta-data/")
    assert outcome == Fail("GET http://169.254.169.254/latest/meta-data/: refused to connect "
                           f"to 169.254.169.254 (cloud metadata); {HINT}", retriable=False)


@pytest.fixture
async def redirector(recorder: Recorder) -> AsyncIterator[tuple[str, list[str]]]:
    """An allowed server whose /to?url=X redirects to X; it records the paths it serves."""
    seen: list[str] = []

    async def to(request: web.Request) -> web.Response:
        seen.append(request.path_qs)
        status = int(request.query.get("status", "302"))
        return web.Response(status=status, headers={"Location": request.query["url"]})

    async def echo(request: web.Request) -> web.Response:
        seen.append(request.path)
        auth = request.headers.get("Authorization", "-")
        return web.Response(text=f"{request.method} {auth} {await request.text()}")

    app = web.Application()
    app.router.add_route("*", "/to", to)
    app.router.add_route("*", "/echo", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://allowed.test:{runner.addresses[0][1]}", seen
    await runner.cleanup()


@pytest.mark.parametrize("target", [
    "http://127.0.0.1:{port}/", "http://internal.test:{port}/", "http://0x7f000001:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/", "http://169.254.169.254/",
])
async def test_a_redirect_to_a_refused_address_is_not_followed(
        recorder: Recorder, redirector: tuple[str, list[str]], target: str) -> None:
    base, seen = redirector
    dns = {"allowed.test": "127.0.0.1", "internal.test": "127.0.0.1"}
    ex = executor(dns, allow=("allowed.test",))
    location = target.format(port=recorder.port)
    outcome = await run(ex, f"{base}/to?url={location}")
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert "refused to connect to " in outcome.error
    assert outcome.error.endswith(HINT)
    assert len(seen) == 1  # the first hop ran; the second never connected
    assert recorder.connections == 0


async def test_redirects_are_followed_up_to_five(redirector: tuple[str, list[str]]) -> None:
    base, seen = redirector
    ex = executor({"allowed.test": "127.0.0.1"}, allow=("allowed.test",))
    url = f"{base}/echo"
    for _ in range(5):
        url = f"{base}/to?url={url.replace('&', '%26').replace('?', '%3F')}"
    assert await run(ex, url) == Success(output="HTTP 200\nGET - ")
    assert len(seen) == 6

    url = f"{base}/to?url={url.replace('&', '%26').replace('?', '%3F')}"
    outcome = await run(executor({"allowed.test": "127.0.0.1"}, allow=("allowed.test",)), url)
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert "more than 5 redirects" in outcome.error


async def test_redirect_methods_and_credentials(redirector: tuple[str, list[str]]) -> None:
    base, _ = redirector
    dns = {"allowed.test": "127.0.0.1", "other.test": "127.0.0.1"}
    allow = ("allowed.test", "other.test")
    same = f"{base}/echo"
    other = same.replace("allowed.test", "other.test")
    headers = {"Authorization": "Bearer t"}
    # 302 after a POST becomes a GET without a body; the same origin keeps the credentials
    assert await run(executor(dns, allow), f"{base}/to?url={same}", body={"a": 1},
                     headers=headers) == Success(output="HTTP 200\nGET Bearer t ")
    # 307 keeps the method and the body; another origin does not get the credentials
    assert await run(executor(dns, allow), f"{base}/to?status=307&url={other}",
                     raw_body="x", headers=headers) == Success(output="HTTP 200\nPOST - x")


async def test_a_redirect_to_another_scheme_is_refused(redirector: tuple[str, list[str]]) -> None:
    base, _ = redirector
    ex = executor({"allowed.test": "127.0.0.1"}, allow=("allowed.test",))
    outcome = await run(ex, f"{base}/to?url=file:///etc/passwd")
    assert outcome == Fail(f"GET {base}/to?url=file:///etc/passwd: HTTP 302 redirect to "
                           "file:///etc/passwd: only http:// and https:// URLs are followed",
                           retriable=False)


async def test_build_executors_guard_every_outbound_kind(recorder: Recorder) -> None:
    executors = build_executors(ExecutorSettings())
    try:
        for kind, payload in [("http", {"url": f"http://localhost:{recorder.port}/"}),
                              ("slack", {"webhook_url": f"http://localhost:{recorder.port}/",
                                         "text": "hi"})]:
            outcome = await executors[kind].execute(make_context(kind, payload))
            assert isinstance(outcome, Fail), kind
            assert "loopback" in outcome.error
    finally:
        for ex in executors.values():
            await ex.close()
    assert recorder.connections == 0


# --- the rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("10.0.0.1", "private"), ("172.16.5.4", "private"), ("192.168.1.1", "private"),
    ("fd12::1", "private (unique local)"), ("fc00::1", "private (unique local)"),
    ("169.254.1.1", "link-local"), ("fe80::1", "link-local"),
    ("169.254.169.254", "cloud metadata"), ("fd00:ec2::254", "cloud metadata"),
    ("100.64.0.1", "shared address space (CGNAT)"), ("100.127.255.254",
                                                     "shared address space (CGNAT)"),
    ("224.0.0.1", "multicast"), ("239.1.1.1", "multicast"), ("ff02::1", "multicast"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"),
    ("192.0.2.1", "reserved (documentation)"), ("2001:db8::1", "reserved (documentation)"),
    ("::ffff:10.0.0.1", "private, as 10.0.0.1 inside an IPv6 address"),
    ("::127.0.0.1", "loopback, as 127.0.0.1 inside an IPv6 address"),
    ("64:ff9b::a9fe:a9fe", "cloud metadata, as 169.254.169.254 inside an IPv6 address"),
    ("2002:c0a8:101::1", "private, as 192.168.1.1 inside an IPv6 address"),
    ("3fff::1", None), ("4000::1", "reserved"),
    ("93.184.216.34", None), ("8.8.8.8", None), ("2606:4700::1111", None),
    ("::ffff:8.8.8.8", None), ("64:ff9b::808:808", None), ("2002:808:808::1", None),
    ("100.128.0.1", None), ("172.32.0.1", None),
])
def test_refusal_reasons(address: str, reason: str | None) -> None:
    assert refusal_reason(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(("host", "address"), [
    ("0x7f000001", "127.0.0.1"), ("2130706433", "127.0.0.1"), ("127.1", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"), ("127.0.0.1.", "127.0.0.1"), ("[::ffff:127.0.0.1]",
                                                                "::ffff:7f00:1"),
    ("::1", "::1"), ("fe80::1%eth0", "fe80::1"), ("0", "0.0.0.0"),
    ("example.org", None), ("0x7f.example", None), ("1e100.net", None), ("", None),
])
def test_ip_literals_are_read_like_inet_aton(host: str, address: str | None) -> None:
    found = parse_ip_literal(host)
    assert (str(found) if found else None) == address


def test_allowlist_entries() -> None:
    policy = OutboundPolicy(["10.0.0.0/8", "127.0.0.1", "hooks.internal", "*.corp.example",
                             "[fd00::1]"])
    for allowed in ("10.9.9.9", "127.0.0.1", "::ffff:10.1.1.1", "fd00::1"):
        policy.check_address(ipaddress.ip_address(allowed))
    assert policy.host_allowed("HOOKS.internal.")
    assert policy.host_allowed("a.b.corp.example")
    assert not policy.host_allowed("corp.example")
    assert not policy.host_allowed("evilhooks.internal")
    policy.check_host("hooks.internal")
    with pytest.raises(OSError, match=r"refused to connect to 127\.0\.0\.2"):
        policy.check_host("127.0.0.2")


@pytest.mark.parametrize("entry", ["", "http://x/", "a b", "10.0.0.0/99x"])
def test_bad_allowlist_entries_are_config_errors(entry: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env={"TICKWORK_OUTBOUND_ALLOW": "x," + entry} if entry else {},
                      flags={"outbound_allow": [entry]})
    assert info.value.field == "executors.outbound_allow"


def test_outbound_allow_from_the_environment() -> None:
    settings = load_settings(env={"TICKWORK_OUTBOUND_ALLOW": "127.0.0.1, localhost"})
    assert settings.executors.outbound_allow == ("127.0.0.1", "localhost")
    assert ExecutorSettings().outbound_allow == ()  # the default: nothing private allowed
