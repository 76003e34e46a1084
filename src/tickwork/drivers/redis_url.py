"""Redis URLs: one server, a Redis Cluster, or a master found through Sentinel.

Pure parsing, no redis import, so settings can check a URL without the redis extra:

- ``redis://[user:pass@]host:port/db``, ``rediss://...``, ``unix://path``: one server
  (``Redis.from_url``);
- ``redis+cluster://[user:pass@]host:port[,host:port...]/``: a Redis Cluster, found from any
  of its nodes (``RedisCluster``);
- ``redis+sentinel://[user:pass@]host:port[,host:port...]/name/db``: the master the sentinels
  call ``name`` (``Sentinel.master_for``), followed through failovers.

``rediss+cluster`` and ``rediss+sentinel`` use TLS to the data nodes. The user and password are
the data nodes'; sentinels are asked without them. A cluster has database 0 only.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

SINGLE, CLUSTER, SENTINEL = "single", "cluster", "sentinel"
SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel",
           "rediss+sentinel")
EXAMPLES = ("redis://host:6379/0, redis+cluster://host:7000,host:7001/ or "
            "redis+sentinel://host:26379,host:26380/MASTER/0")


@dataclass(frozen=True, slots=True)
class RedisTarget:
    kind: str  # SINGLE, CLUSTER or SENTINEL
    url: str  # the URL as given (SINGLE opens it as it is)
    nodes: tuple[tuple[str, int], ...] = ()  # cluster start-up nodes, or the sentinels
    master: str = ""  # SENTINEL: the monitored master's name
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False


def _nodes(netloc: str, default_port: int) -> tuple[tuple[str, int], ...]:
    nodes = []
    for part in netloc.split(","):
        host, port = part.strip(), str(default_port)
        if host.startswith("["):  # [::1]:7000
            host, _, rest = host[1:].partition("]")
            port = rest.removeprefix(":") or port
        elif host.count(":") == 1:
            host, port = host.split(":")
        if not host:
            raise ValueError(f"a node without a host in {netloc!r}")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"node {part.strip()!r}: the port must be a number in 1..65535")
        nodes.append((host, int(port)))
    return tuple(nodes)


def parse_redis_url(url: str) -> RedisTarget:
    """The target of a Redis URL; ValueError naming what is wrong (never echoing a password)."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in SCHEMES:
        got = f"a {scheme!r} URL" if sep else "no scheme"
        raise ValueError(f"must be {EXAMPLES} (got {got})")
    if "+" not in scheme:
        return RedisTarget(SINGLE, url)
    kind = CLUSTER if scheme.endswith("+cluster") else SENTINEL
    rest = rest.partition("?")[0].partition("#")[0]
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username, password = (unquote(user) or None), (unquote(secret) if colon else None)
    if not hosts:
        raise ValueError(f"a {scheme} URL names at least one host:port")
    nodes = _nodes(hosts, 6379 if kind == CLUSTER else 26379)
    parts = [p for p in path.split("/") if p]
    master, db = "", "0"
    if kind == CLUSTER:
        if parts and parts != ["0"]:
            raise ValueError("a Redis Cluster has database 0 only: end the URL with / or /0")
    else:
        if not parts or len(parts) > 2:
            raise ValueError(f"a {scheme} URL ends with /MASTER_NAME or /MASTER_NAME/DB")
        master, db = parts[0], parts[1] if len(parts) == 2 else "0"
        if not db.isdigit():
            raise ValueError(f"the database must be a number (got {db!r})")
    return RedisTarget(kind, url, nodes, unquote(master), int(db), username, password,
                       ssl=scheme.startswith("rediss"))
