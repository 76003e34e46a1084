"""The outbound-address guard: jobs must not become a way into the network they run in.

Every address an outbound HTTP call connects to is checked against ``OutboundPolicy``:
loopback, private, link-local, cloud metadata, shared (CGNAT), unspecified, multicast and
reserved addresses are refused unless ``ExecutorSettings.outbound_allow`` lists them (CIDRs or
host names). IPv6 forms that embed an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64,
6to4) are judged by the address they embed.

The check runs at connect time, in ``outbound.GuardedResolver``: aiohttp connects only to the
addresses its resolver returns, so a name that resolves to 127.0.0.1 (or changes its answer
between a check and the connect, DNS rebinding) is refused. aiohttp does not ask the resolver
about an IP literal, so ``OutboundPolicy.check_host`` checks the URL's host too, normalised the
way ``inet_aton`` reads it (``0x7f000001``, ``2130706433``, ``127.1``).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from tickwork.errors import ConfigError, TickworkError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOW_HINT = "allow it with outbound_allow"


def _nets(*specs: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(cidr), why) for cidr, why in specs)


# Checked in order: the first match names the reason.
METADATA = frozenset({ipaddress.ip_address("169.254.169.254"),
                      ipaddress.ip_address("fd00:ec2::254")})
REFUSED_V4 = _nets(
    ("0.0.0.0/8", "unspecified"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("169.254.0.0/16", "link-local"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "reserved (documentation)"),
    ("198.51.100.0/24", "reserved (documentation)"),
    ("203.0.113.0/24", "reserved (documentation)"),
    ("192.88.99.0/24", "reserved (6to4 relay)"),
    ("198.18.0.0/15", "reserved (benchmarking)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # includes the broadcast address 255.255.255.255
)
REFUSED_V6 = _nets(
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "private (local-use NAT64)"),
    ("100::/64", "reserved (discard)"),
    ("2001:db8::/32", "reserved (documentation)"),
    ("2001::/23", "reserved (IETF protocol assignments)"),
    ("fc00::/7", "private (unique local)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "private (site-local)"),
    ("ff00::/8", "multicast"),
)
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
NAT64 = ipaddress.ip_network("64:ff9b::/96")
V4_COMPATIBLE = ipaddress.ip_network("::/96")


class OutboundRefused(TickworkError, OSError):
    """A connection to a refused address was stopped before it was made.

    An OSError, so aiohttp reports it like a failed DNS lookup (``ClientConnectorDNSError``
    with this as its cause) and never tries the address.
    """

    def __init__(self, address: str, reason: str, host: str | None = None) -> None:
        self.address = address
        self.reason = reason
        self.host = host
        via = f" (the address of {host})" if host and host != address else ""
        super().__init__(f"refused to connect to {address}{via} ({reason}); {ALLOW_HINT}")

    def __str__(self) -> str:
        return str(self.args[0])


def embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, compatible, NAT64, 6to4), if any."""
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr in NAT64 or (addr in V4_COMPATIBLE and int(addr) > 1):
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def refusal_reason(addr: IPAddress) -> str | None:
    """Why ``addr`` is refused by default, or None if it is a public address."""
    if addr in METADATA:
        return "cloud metadata"
    if isinstance(addr, ipaddress.IPv6Address):
        inner = embedded_ipv4(addr)
        if inner is not None:
            why = refusal_reason(inner)
            return None if why is None else f"{why}, as {inner} inside an IPv6 address"
        for net, why in REFUSED_V6:
            if addr in net:
                return why
        return None if addr in GLOBAL_UNICAST_V6 else "reserved"
    for net, why in REFUSED_V4:
        if addr in net:
            return why
    return None


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address a URL host names literally, read as ``inet_aton`` would, else None.

    ``[::ffff:127.0.0.1]``, ``0x7f000001``, ``2130706433``, ``0177.0.0.1`` and ``127.1`` are all
    127.0.0.1. A host name (``example.org``) gives None: the resolver checks what it resolves to.
    """
    text = host.strip().rstrip(".").strip("[]")
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text.split("%", 1)[0])
        except ValueError:
            return None
    if not text or not all(c in "0123456789abcdefxABCDEFX." for c in text) or \
            not text[0].isdigit():
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        return None


class OutboundPolicy:
    """Which addresses outbound calls may reach: public ones, plus ``allow``.

    ``allow`` entries are CIDRs or single addresses (``10.0.0.0/8``, ``127.0.0.1``,
    ``fd00::/8``), host names (``localhost``, ``hooks.internal``) or ``*.`` suffixes
    (``*.corp.example``: every name under it). A host name entry allows whatever it resolves to.
    """

    def __init__(self, allow: Iterable[str] = ()) -> None:
        self.networks: list[IPNetwork] = []
        self.names: set[str] = set()
        self.suffixes: list[str] = []
        for entry in allow:
            self._add(entry.strip())

    def _add(self, entry: str) -> None:
        if not entry:
            raise ConfigError("executors.outbound_allow", "has an empty entry")
        try:
            self.networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            return
        except ValueError:
            pass
        name = entry.lower().rstrip(".")
        label = name.removeprefix("*.")
        if not label or any(c.isspace() or c in "/:[]@" for c in label):
            raise ConfigError("executors.outbound_allow",
                              f"{entry!r} is neither a CIDR, an address nor a host name")
        if name.startswith("*."):
            self.suffixes.append("." + label)
        else:
            self.names.add(name)

    def host_allowed(self, host: str) -> bool:
        """True if ``host`` (a name from a URL) is allowlisted by name."""
        name = host.lower().rstrip(".")
        return name in self.names or any(name.endswith(s) for s in self.suffixes)

    def address_allowed(self, addr: IPAddress) -> bool:
        candidates: list[IPAddress] = [addr]
        if isinstance(addr, ipaddress.IPv6Address):
            inner = embedded_ipv4(addr)
            if inner is not None:
                candidates.append(inner)
        return any(a.version == net.version and a in net
                   for a in candidates for net in self.networks)

    def check_address(self, addr: IPAddress, host: str | None = None) -> None:
        """Raise OutboundRefused unless ``addr`` may be connected to."""
        if self.address_allowed(addr):
            return
        why = refusal_reason(addr)
        if why is not None:
            raise OutboundRefused(str(addr), why, host)

    def check_host(self, host: str) -> None:
        """Check a URL's host before the request: IP literals never reach the resolver."""
        if self.host_allowed(host):
            return
        literal = parse_ip_literal(host)
        if literal is not None:
            self.check_address(literal, host)
