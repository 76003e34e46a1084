"""A redis.asyncio client from a URL: one server, a Redis Cluster, or a Sentinel-managed master.

The URL forms are in ``tickwork.drivers.redis_url``. Every client decodes responses. A cluster
client follows MOVED/ASK redirections and re-reads the slot map after a failover; a Sentinel
client asks the sentinels for the master on each new connection, so after a failover the
next connection goes to the promoted replica (old connections fail once, with
DispatchUnavailable, and are replaced).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.connection import HiredisRespSerializer
from redis.utils import HIREDIS_AVAILABLE

from tickwork.drivers.redis_url import CLUSTER, SENTINEL, parse_redis_url

RedisClient = Redis | RedisCluster


class SentinelMaster(Redis):
    """The master's client; closing it closes the clients of the sentinels that named it."""

    discovery: Sentinel | None = None  # not "sentinel": Redis has a SENTINEL command method

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        if self.discovery is not None:
            for client in self.discovery.sentinels:
                await client.aclose()


def open_client(url: str, **options: Any) -> RedisClient:
    """``options`` go to every data connection (socket_timeout, socket_connect_timeout,
    health_check_interval, ...); ``decode_responses`` is always on."""
    target = parse_redis_url(url)
    options = {**options, "decode_responses": True}
    if target.kind == CLUSTER:
        return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in target.nodes],
                            username=target.username, password=target.password,
                            ssl=target.ssl, **options)
    if target.kind == SENTINEL:
        sentinel_options: dict[str, Any] = {
            k: v for k, v in options.items() if k in ("socket_timeout", "socket_connect_timeout")}
        # Each sentinel is asked once: the list is the redundancy. redis-py's default retries
        # with backoff made every call wait ~4 s when no sentinel answered, before the
        # caller could go degraded.
        sentinel_options["retry"] = Retry(NoBackoff(), 0)
        sentinel = Sentinel(  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            list(target.nodes), sentinel_kwargs=sentinel_options)
        client: SentinelMaster = sentinel.master_for(
            target.master, redis_class=SentinelMaster, db=target.db,
            username=target.username, password=target.password, ssl=target.ssl, **options)
        client.discovery = sentinel
        return _packed_by_hiredis(client)
    return _packed_by_hiredis(Redis.from_url(url, **options))


class _HiredisPacking:
    """Commands packed by hiredis (C), as redis-py's own synchronous connections pack them:
    its asyncio connections pack each argument in Python, a tenth of a planner's feed of the
    due set (two arguments a run) and of a worker's acks."""

    _serializer = HiredisRespSerializer()

    def pack_command(self, *args: Any) -> list[bytes]:
        return self._serializer.pack(*args)  # type: ignore[no-any-return]


_PACKING: dict[type, type] = {}  # one subclass per connection class


def _hiredis_packing(connection_class: type) -> type:
    made = _PACKING.get(connection_class)
    if made is None:
        made = _PACKING[connection_class] = type(
            f"Hiredis{connection_class.__name__}", (_HiredisPacking, connection_class), {})
    return made


def _packed_by_hiredis(client: Redis) -> Redis:
    """``client``, whose new connections pack commands with hiredis (when it is installed:
    a dependency of the redis extra). The connection class the URL chose (plain, TLS, Unix
    socket, a Sentinel's master) is kept; only its packing changes."""
    pool = client.connection_pool
    if HIREDIS_AVAILABLE and not issubclass(pool.connection_class, _HiredisPacking):
        pool.connection_class = _hiredis_packing(pool.connection_class)
    return client


async def delete_keys(client: RedisClient, patterns: Sequence[str]) -> int:
    """Delete every key matching one of ``patterns`` (SCAN, then DEL by 500); how many."""
    deleted = 0
    for pattern in patterns:
        batch: list[str] = []
        async for key in client.scan_iter(match=pattern, count=500):
            batch.append(key)
            if len(batch) >= 500:
                deleted += await client.delete(*batch)
                batch.clear()
        if batch:
            deleted += await client.delete(*batch)
    return deleted


async def ping(client: RedisClient) -> None:
    """PING; on a cluster every master, so a slot without a live master fails the probe."""
    if isinstance(client, RedisCluster):
        await client.ping(target_nodes=RedisCluster.PRIMARIES)
    else:
        await client.ping()


async def maxmemory_policies(client: RedisClient) -> dict[str, str | None]:
    """``maxmemory-policy`` per node ("" for one server); on a cluster every node the client
    knows: the masters, and the replicas that CLUSTER SLOTS lists (Redis 7 lists a replica
    once it has replicated something)."""
    name = "maxmemory-policy"
    if not isinstance(client, RedisCluster):
        return {"": (await client.config_get(name)).get(name)}
    replies: dict[Any, Any] = await client.config_get(name, target_nodes=RedisCluster.ALL_NODES)
    if name in replies:  # one node answered: redis-py returns its reply alone
        return {"": replies[name]}
    return {str(node): (reply or {}).get(name) for node, reply in replies.items()}


def decodes_responses(client: RedisClient) -> bool:
    return bool(client.get_encoder().decode_responses)


def is_cluster(client: RedisClient) -> bool:
    return isinstance(client, RedisCluster)
