"""Redis for tests: a key prefix per test on a shared server, cleaned up afterwards.

``TICKWORK_TEST_REDIS_URL`` names the server (default ``redis://127.0.0.1:6379/0``). When it
cannot be reached, tests that need it are skipped with a message saying so; with ``CI=true``
they fail instead, because a missing service in CI is a failure.

Shared fixtures never flush: other engineers' tests run on the same server at the same time, so
each test deletes only the keys of its own prefix (SCAN + DEL). The one test about losing every
key gets ``volatile_dispatch``: a database of its own (``TICKWORK_TEST_REDIS_VOLATILE_DB``,
default 15) that it may FLUSHDB, standing for FLUSHALL or a restart without persistence. A lock
key on the main database keeps two test runs from flushing it under each other.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from redis.exceptions import RedisClusterException, RedisError

from tickwork.drivers.dispatch import Entry
from tickwork.drivers.redis.connect import RedisClient, delete_keys, open_client
from tickwork.drivers.redis.dispatch import RedisDispatch
from tickwork.drivers.redis.keys import GROUP, Keyspace

URL_ENV = "TICKWORK_TEST_REDIS_URL"
DEFAULT_URL = "redis://127.0.0.1:6379/0"
VOLATILE_DB_ENV = "TICKWORK_TEST_REDIS_VOLATILE_DB"
PREFIX = "tw-test-"
LOCK_KEY = "tw-test:volatile-db-lock"
UNREACHABLE_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def redis_url() -> str:
    return os.environ.get(URL_ENV, DEFAULT_URL)


def volatile_url() -> str:
    base, _, _ = redis_url().rpartition("/")
    return f"{base}/{os.environ.get(VOLATILE_DB_ENV, '15')}"


def _unreachable(reason: str) -> None:
    message = f"Redis is not reachable at {redis_url()} ({reason}); set {URL_ENV}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}. CI=true: a missing service is a failure here.")
    pytest.skip(message)


async def connect(url: str | None = None) -> RedisClient:
    """A client (decode_responses) on a server that answers, or a skip (a failure in CI).
    ``url`` may name a Redis Cluster or a Sentinel-managed master too."""
    client = open_client(url or redis_url(), socket_connect_timeout=2)
    try:
        await client.ping()
    except (RedisError, RedisClusterException, OSError) as exc:
        await client.aclose()
        _unreachable(str(exc) or type(exc).__name__)
    return client


def new_prefix() -> str:
    return f"{PREFIX}{uuid.uuid4().hex[:12]}"


async def delete_prefix(client: RedisClient, prefix: str) -> int:
    """Delete every key of one tickwork prefix (never FLUSHALL: the server is shared)."""
    if not prefix.startswith(PREFIX):
        raise ValueError(f"refusing to delete keys of {prefix!r}: not a test prefix")
    return await delete_keys(client, Keyspace(prefix).patterns())


@asynccontextmanager
async def prefixed_dispatch(url: str | None = None, prefix: str | None = None,
                            **options: Any) -> AsyncIterator[RedisDispatch]:
    """A RedisDispatch on its own client and prefix; its keys are deleted on exit."""
    client = await connect(url)
    prefix = prefix or new_prefix()
    dispatch = RedisDispatch(client, prefix=prefix, owns_client=True, **options)
    try:
        yield dispatch
    finally:
        await delete_prefix(client, prefix)
        await dispatch.close()


async def make_idle(dispatch: RedisDispatch, queue: str, consumer: str,
                    entries: Sequence[Entry], idle_ms: int) -> None:
    """XCLAIM to the same consumer with IDLE: sets the idle time, no waiting, no delivery
    (the conformance suite's ``make_idle``)."""
    for e in entries:
        await dispatch.client.xclaim(dispatch.keys.stream(queue, e.band), GROUP, consumer, 0,
                                     [e.id], idle=idle_ms, justid=True)


@pytest.fixture
def redis_prefix() -> str:
    return new_prefix()


@pytest.fixture
async def redis_dispatch(redis_prefix: str) -> AsyncIterator[RedisDispatch]:
    async with prefixed_dispatch(prefix=redis_prefix) as dispatch:
        yield dispatch


@pytest.fixture
async def redis_peer_dispatch(redis_prefix: str) -> AsyncIterator[RedisDispatch]:
    """A second client on the same prefix, as another process would connect."""
    client = await connect()
    dispatch = RedisDispatch(client, prefix=redis_prefix, owns_client=True)
    yield dispatch
    await dispatch.close()


LoseData = Callable[[], Awaitable[None]]


@pytest.fixture
async def volatile_dispatch() -> AsyncIterator[tuple[RedisDispatch, LoseData]]:
    """A dispatch on the volatile database, and a function that FLUSHDBs it."""
    lock = await connect()
    token = uuid.uuid4().hex
    # At most one test run at a time flushes the volatile database; 60 s covers a stuck run.
    for _ in range(600):
        if await lock.set(LOCK_KEY, token, nx=True, px=60_000):
            break
        await lock.blpop([f"{LOCK_KEY}:released"], timeout=0.1)
    else:
        await lock.aclose()
        pytest.fail(f"the volatile Redis database is locked by another run ({LOCK_KEY})")
    async with prefixed_dispatch(volatile_url()) as dispatch:

        async def lose() -> None:
            await dispatch.client.flushdb()

        try:
            yield dispatch, lose
        finally:
            if await lock.get(LOCK_KEY) == token:
                await lock.delete(LOCK_KEY)
                await lock.rpush(f"{LOCK_KEY}:released", 1)  # wakes a waiting run at once
                await lock.expire(f"{LOCK_KEY}:released", 5)
            await lock.aclose()


@pytest.fixture
async def unreachable_dispatch() -> AsyncIterator[RedisDispatch]:
    dispatch = RedisDispatch.from_url(UNREACHABLE_URL, prefix=new_prefix())
    yield dispatch
    await dispatch.close()
