"""Redis URLs: one server, a Redis Cluster, a Sentinel-managed master; and what the client
that each opens is, without a server."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from tickwork.drivers.redis.connect import SentinelMaster, decodes_responses, open_client
from tickwork.drivers.redis.errors import translate
from tickwork.drivers.redis_url import CLUSTER, SENTINEL, SINGLE, parse_redis_url
from tickwork.errors import DispatchUnavailable


def test_single_server_urls_pass_through() -> None:
    for url in ("redis://h:6379/2", "rediss://u:p@h/0", "unix:///run/redis.sock"):
        target = parse_redis_url(url)
        assert (target.kind, target.url) == (SINGLE, url)


def test_cluster_url() -> None:
    t = parse_redis_url("redis+cluster://app:s%40cret@a:7000,b:7001,[::1]:7002,c/")
    assert t.kind == CLUSTER
    assert t.nodes == (("a", 7000), ("b", 7001), ("::1", 7002), ("c", 6379))
    assert (t.username, t.password, t.db, t.ssl) == ("app", "s@cret", 0, False)
    assert parse_redis_url("rediss+cluster://a:7000").ssl


def test_sentinel_url() -> None:
    t = parse_redis_url("redis+sentinel://s1:26379,s2/mymaster/3")
    assert (t.kind, t.master, t.db) == (SENTINEL, "mymaster", 3)
    assert t.nodes == (("s1", 26379), ("s2", 26379))
    assert parse_redis_url("redis+sentinel://:pw@s1/m").password == "pw"


@pytest.mark.parametrize(("url", "message"), [
    ("http://a:1", "got a 'http' URL"),
    ("a:7000", "got no scheme"),
    ("redis+cluster:///", "at least one host:port"),
    ("redis+cluster://a:99999/", "1..65535"),
    ("redis+cluster://a:7000,:7001/", "without a host"),
    ("redis+cluster://a:7000/1", "database 0 only"),
    ("redis+sentinel://s1/", "/MASTER_NAME"),
    ("redis+sentinel://s1/m/x", "must be a number"),
    ("redis+sentinel://s1/m/0/extra", "/MASTER_NAME"),
])
def test_bad_urls_say_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_redis_url(url)


def test_a_password_is_never_echoed() -> None:
    with pytest.raises(ValueError, match="port") as info:
        parse_redis_url("redis+cluster://u:hunter2@a:x/")
    assert "hunter2" not in str(info.value)


async def test_each_url_opens_its_kind_of_client() -> None:
    single = open_client("redis://127.0.0.1:1/0")
    cluster = open_client("redis+cluster://127.0.0.1:1,127.0.0.1:2/", socket_timeout=1,
                          health_check_interval=30)
    sentinel = open_client("redis+sentinel://127.0.0.1:1/m/2")
    try:
        assert type(single) is Redis
        assert isinstance(cluster, RedisCluster)
        assert isinstance(sentinel, SentinelMaster)
        assert sentinel.discovery is not None
        assert all(decodes_responses(c) for c in (single, cluster, sentinel))
    finally:
        for client in (single, cluster, sentinel):
            await client.aclose()


async def test_rediss_forms_use_tls_to_the_data_nodes() -> None:
    sentinel = open_client("rediss+sentinel://127.0.0.1:1/m/0")
    cluster = open_client("rediss+cluster://127.0.0.1:1/")
    plain = open_client("redis+cluster://127.0.0.1:1/")
    try:
        assert isinstance(sentinel, SentinelMaster)
        assert "SSL" in sentinel.connection_pool.connection_class.__name__
        assert isinstance(cluster, RedisCluster)
        assert isinstance(plain, RedisCluster)
        kwargs = cluster.nodes_manager.connection_kwargs
        assert "SSL" in kwargs["connection_class"].__name__
        assert "SSL" not in plain.nodes_manager.connection_kwargs["connection_class"].__name__
    finally:
        for client in (sentinel, cluster, plain):
            await client.aclose()


@pytest.mark.parametrize(("url", "kind"), [
    ("redis://127.0.0.1:1/0", "Connection"), ("rediss://127.0.0.1:1/0", "SSLConnection"),
    ("unix:///tmp/none.sock", "UnixDomainSocketConnection"),
    ("redis+sentinel://127.0.0.1:1/m/0", "SentinelManagedConnection")])
async def test_commands_are_packed_by_hiredis_on_the_urls_own_connection(
        url: str, kind: str) -> None:
    """The connection class the URL chose is kept, and what it sends is byte for byte what
    redis-py's own packing sends."""
    client = open_client(url)
    try:
        cls = client.connection_pool.connection_class
        assert cls.__name__ == f"Hiredis{kind}"
        base = next(c for c in cls.__mro__[1:] if c.__name__ == kind)
        command = ("ZADD", "{tickwork:default}:due", "NX", 1764270000123, "0|ab:1", 1.5, "é")
        ours = client.connection_pool.make_connection()
        theirs = base.__new__(base)
        theirs.encoder = ours.encoder
        theirs._buffer_cutoff = ours._buffer_cutoff
        assert b"".join(ours.pack_command(*command)) == b"".join(
            base.pack_command(theirs, *command))
        assert b"".join(ours.pack_command("CONFIG GET", "x")).startswith(b"*3\r\n$6\r\nCONFIG")
    finally:
        await client.aclose()


def _raise_inside(filename: str, error: str) -> None:
    exec(compile(f"raise {error}", filename, "exec"))  # a frame of that file


@pytest.mark.parametrize("where", ["/venv/site-packages/redis/asyncio/connection.py",
                                   "/usr/lib/python3.11/asyncio/selector_events.py"])
def test_a_connection_dropped_under_a_command_is_unavailable(where: str) -> None:
    """redis-py leaks AttributeError/TypeError from a connection closed under a command."""
    with pytest.raises(DispatchUnavailable, match="connection dropped"), translate("x"):
        _raise_inside(where, "AttributeError(\"'NoneType' object has no attribute 'x'\")")


def test_our_own_attribute_errors_are_not_hidden() -> None:
    with pytest.raises(AttributeError), translate("x"):
        _raise_inside("/src/tickwork/drivers/redis/dispatch.py", "AttributeError('bug')")
    with pytest.raises(TypeError), translate("x"):
        _raise_inside("/app/mine.py", "TypeError('bug')")
