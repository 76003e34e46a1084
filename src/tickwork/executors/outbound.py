"""Outbound HTTP for the http and slack kinds: one guarded connection pool, redirects by hand.

Every hop of a request is checked by the SSRF guard (``ssrf.py``): the URL's host before the
request (IP literals), and every resolved address at connect time (``GuardedResolver``).
Redirects are followed here, not by aiohttp, so each new URL passes the same checks. The whole
chain shares one deadline; a body is read only up to the output cap.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from multidict import CIMultiDict
from yarl import URL

from tickwork.errors import TickworkError
from tickwork.executors.base import ERROR_LIMIT_BYTES, ExecutorSettings, cap_text
from tickwork.executors.ssrf import OutboundPolicy, OutboundRefused
from tickwork.outcomes import Fail

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Dropped when a redirect leaves the origin: credentials meant for the first host only.
CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")
# Dropped with the body when a redirect turns the request into a GET.
BODY_HEADERS = ("content-type", "webhook-id", "webhook-timestamp", "webhook-signature")


class GuardedResolver(AbstractResolver):
    """Resolves with ``inner`` (aiohttp's default), then refuses if any address is refused.

    A name with one refused address is refused whole: which address aiohttp would try first
    is not ours to guess.
    """

    def __init__(self, policy: OutboundPolicy, inner: AbstractResolver | None = None) -> None:
        self.policy = policy
        self.inner = inner if inner is not None else DefaultResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        results = await self.inner.resolve(host, port, family)
        if self.policy.host_allowed(host):
            return results
        for result in results:
            try:
                addr = ipaddress.ip_address(result["host"].split("%", 1)[0])
            except ValueError:
                raise OutboundRefused(result["host"], "not an IP address", host) from None
            self.policy.check_address(addr, host)
        return results

    async def close(self) -> None:
        await self.inner.close()



class RedirectError(TickworkError):
    """A redirect that cannot be followed: too many, no Location, or a non-HTTP target."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: CIMultiDict[str]
    body: bytes  # at most limit + 1 bytes
    url: URL  # the last URL requested, after redirects
    redirects: int


def find_refusal(exc: BaseException) -> OutboundRefused | None:
    """The OutboundRefused behind an aiohttp error, if the guard caused it."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OutboundRefused):
            return seen
        nested = getattr(seen, "os_error", None)
        if isinstance(nested, OutboundRefused):
            return nested
        seen = seen.__cause__ or seen.__context__
    return None


class OutboundClient:
    """One guarded aiohttp session, created on first use and shared by the executors."""

    def __init__(self, settings: ExecutorSettings, *, resolver: Any = None) -> None:
        self.settings = settings
        self.policy = OutboundPolicy(settings.outbound_allow)
        self._inner_resolver = resolver  # tests inject a fake DNS here, below the guard
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.settings.http_max_connections, limit_per_host=0,
                resolver=GuardedResolver(self.policy, self._inner_resolver),
            )
            # Jobs must not see each other's cookies: no cookie jar. trust_env stays off, so no
            # proxy from the environment can carry a request past the guard.
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(
        self,
        method: str,
        url: str,
        *,
        headers: CIMultiDict[str],
        data: bytes | None,
        timeout_seconds: float,
        label: str,
        show_errors: bool = True,
    ) -> Response | Fail:
        """``request``, with every failure as a Fail whose error starts with ``label``.

        A refused address, a bad redirect or an invalid URL is fatal; a timeout or a connection
        error is retriable. ``show_errors=False`` keeps the client's error text (which may
        quote the URL) out of the message.
        """
        try:
            return await self.request(method, url, headers=headers, data=data,
                                      timeout_seconds=timeout_seconds)
        except TimeoutError:
            return Fail(self._short(f"{label} timed out after {timeout_seconds:g}s"))
        except (OutboundRefused, RedirectError) as exc:
            return Fail(self._short(f"{label}: {exc}"), retriable=False)
        except aiohttp.InvalidURL as exc:
            detail = f" {exc}" if show_errors else ""
            return Fail(self._short(f"{label}: invalid URL{detail}"), retriable=False)
        except aiohttp.ClientError as exc:
            refused = find_refusal(exc)
            if refused is not None:
                return Fail(self._short(f"{label}: {refused}"), retriable=False)
            detail = f": {exc}" if show_errors else ""
            return Fail(self._short(f"{label} failed: {type(exc).__name__}{detail}"))

    def _short(self, text: str) -> str:
        return cap_text(text, min(ERROR_LIMIT_BYTES, self.settings.output_limit_bytes))

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: CIMultiDict[str],
        data: bytes | str | None,
        timeout_seconds: float,
        read_body: bool = True,
    ) -> Response:
        """Send, following up to MAX_REDIRECTS redirects, every hop through the guard.

        Raises OutboundRefused, RedirectError, TimeoutError or aiohttp.ClientError.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_seconds
        target = URL(url, encoded=False)
        headers = CIMultiDict(headers)
        for hop in range(MAX_REDIRECTS + 1):
            self.policy.check_host(target.raw_host or "")
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError
            async with self.session().request(
                method, target, headers=headers, data=data, allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=remaining),
            ) as resp:
                location = resp.headers.get("Location")
                if resp.status not in REDIRECT_STATUSES or location is None:
                    body = b""
                    if read_body and method != "HEAD":
                        body = await self._read_capped(resp)
                    return Response(resp.status, CIMultiDict(resp.headers), body, target, hop)
            if hop == MAX_REDIRECTS:
                raise RedirectError(f"more than {MAX_REDIRECTS} redirects; the last went to "
                                    f"{location}")
            target, method, data = self._next_hop(target, location, resp.status,
                                                  (method, data, headers))
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _next_hop(current: URL, location: str, status: int,
                  request: tuple[str, bytes | str | None, CIMultiDict[str]],
                  ) -> tuple[URL, str, bytes | str | None]:
        """Where a redirect goes and how: 303 (and 301/302 after a POST) become a GET without
        a body; credentials are dropped when the origin changes. Edits ``headers``."""
        method, data, headers = request
        try:
            target = current.join(URL(location))
        except ValueError as exc:
            raise RedirectError(f"HTTP {status} redirect to an invalid URL ({exc})") from None
        if target.scheme not in ("http", "https") or not target.raw_host:
            raise RedirectError(f"HTTP {status} redirect to {location}: only http:// and "
                                "https:// URLs are followed")
        if target.origin() != current.origin():
            for name in CREDENTIAL_HEADERS:
                headers.popall(name, None)
        if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
            method, data = "GET", None
            for name in BODY_HEADERS:
                headers.popall(name, None)
        return target.with_fragment(None), method, data

    async def _read_capped(self, resp: aiohttp.ClientResponse) -> bytes:
        """At most output_limit_bytes + 1 bytes of the body; the rest is never read."""
        want = self.settings.output_limit_bytes + 1
        chunks: list[bytes] = []
        got = 0
        while got < want:
            chunk = await resp.content.read(want - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
