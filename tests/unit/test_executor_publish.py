"""The publish kind against the real brokers: Redis Streams, RabbitMQ, NATS JetStream, MQTT.

Each end-to-end test subscribes a consumer of its own, fires a publish job through the worker
(the harness) and counts what arrived, with its idempotency key and attempt.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiomqtt
import aiormq
import nats
import pytest
from nats.js.api import StreamConfig
from redis.asyncio import Redis

from tickwork.client import AsyncClient
from tickwork.config import load_settings
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError, ValidationError
from tickwork.executors import ExecutorSettings, validate_payload
from tickwork.executors.admission import JobPolicy
from tickwork.executors.brokers import envelope
from tickwork.executors.publish import PublishExecutor, message_for
from tickwork.models import rfc3339
from tickwork.outcomes import Fail, Success
from tickwork.testing.brokers import require, unique
from tickwork.testing.harness import START, Harness, make_harness
from tickwork.testing.jobs import make_context

LOCAL = ("127.0.0.1",)


async def fire(h: Harness, payload: dict[str, Any], name: str = "pub") -> str:
    """Create a publish job due now, run it through the worker, return its recorded output."""
    job = await h.client.create_job({"name": name, "schedule": {"at": rfc3339(START)},
                                     "kind": "publish", "payload": payload,
                                     "retry": {"max_attempts": 1}})
    await h.tick()
    done = await h.completed()
    assert done.state.value == "succeeded", done.error
    assert done.output is not None
    assert done.output.startswith("broker 'events' acknowledged: ")
    return f"{job.id}:{rfc3339(START)}"


def where(url: str) -> tuple[str, int]:
    """The host and port of an MQTT URL, for a test's own subscriber."""
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 1883


async def publish(url: str, payload: dict[str, Any], *, allow: tuple[str, ...] = LOCAL,
                  attempt: int = 1) -> Any:
    ex = PublishExecutor(ExecutorSettings(outbound_allow=allow, brokers=(("events", url),)))
    try:
        return await ex.execute(make_context("publish", payload, attempt=attempt,
                                             timeout_seconds=5))
    finally:
        await ex.close()


# --- end to end, one per broker ---------------------------------------------------------------


async def test_redis_stream_gets_the_entry_with_its_fields(tmp_path: Path) -> None:
    url = require("redis")
    stream = unique()
    redis = Redis.from_url(url, decode_responses=True)
    try:
        async with make_harness(tmp_path, brokers=(("events", url),)) as h:
            key = await fire(h, {"broker": "events", "stream": stream, "maxlen": 1000,
                                 "body": {"invoice": 7}})
        [(entry_id, fields)] = await redis.xrange(stream)
        assert fields == {"body": '{"invoice":7}', "idempotency_key": key,
                          "scheduled_at": rfc3339(START), "attempt": "1",
                          "job": key.removesuffix(":" + rfc3339(START))}
        assert entry_id
    finally:
        await redis.delete(stream)
        await redis.aclose()


async def test_rabbitmq_gets_a_persistent_message_with_headers(tmp_path: Path) -> None:
    url = require("amqp")
    exchange, queue = unique(), unique()
    conn = await aiormq.connect(url)
    ch = await conn.channel()
    got: asyncio.Queue[aiormq.abc.DeliveredMessage] = asyncio.Queue()
    try:
        await ch.exchange_declare(exchange, exchange_type="topic", auto_delete=True)
        await ch.queue_declare(queue, exclusive=True, auto_delete=True)
        await ch.queue_bind(queue, exchange, routing_key="billing.#")

        async def on_message(message: aiormq.abc.DeliveredMessage) -> None:
            got.put_nowait(message)

        await ch.basic_consume(queue, on_message, no_ack=True)
        async with make_harness(tmp_path, brokers=(("events", url),)) as h:
            key = await fire(h, {"broker": "events", "exchange": exchange,
                                 "routing_key": "billing.run", "body": {"run": True}})
        message = await asyncio.wait_for(got.get(), 10)
        assert got.empty()
        assert json.loads(message.body) == {"run": True}
        headers = message.header.properties.headers or {}
        assert headers["Idempotency-Key"] == key
        assert headers["Tickwork-Attempt"] == "1"
        assert headers["Tickwork-Scheduled-At"] == rfc3339(START)
        assert message.header.properties.delivery_mode == 2
        assert message.header.properties.message_id == key
    finally:
        await conn.close()


async def test_nats_jetstream_stores_the_message_once(tmp_path: Path) -> None:
    url = require("nats")
    stream, subject = unique("_"), unique(".")
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{subject}.>"]))
    got: asyncio.Queue[Any] = asyncio.Queue()
    try:
        async def on_message(message: Any) -> None:
            got.put_nowait(message)

        sub = await nc.subscribe(f"{subject}.>", cb=on_message)
        async with make_harness(tmp_path, brokers=(("events", url),)) as h:
            key = await fire(h, {"broker": "events", "subject": f"{subject}.billing",
                                 "body": "hello"})
        message = await asyncio.wait_for(got.get(), 10)
        assert got.empty()
        assert json.loads(message.data) == "hello"
        assert message.headers["Idempotency-Key"] == key
        assert message.headers["Nats-Msg-Id"] == key
        assert message.headers["Tickwork-Attempt"] == "1"
        await sub.unsubscribe()
        # A second attempt of the same occurrence is dropped by the stream's duplicate window.
        again = await publish(url, {"broker": "events", "subject": f"{subject}.billing",
                                    "body": "hello"}, attempt=2)
        first = await publish(url, {"broker": "events", "subject": f"{subject}.billing",
                                    "body": "hello"}, attempt=3)
        assert isinstance(first, Success)
        assert "duplicate" in first.output
        assert isinstance(again, Success)
        info = await js.stream_info(stream)
        assert info.state.messages == 2  # the harness's run, and job-1's first attempt
    finally:
        await js.delete_stream(stream)
        await nc.close()


async def test_mqtt_gets_the_message_with_v5_user_properties(tmp_path: Path) -> None:
    url = require("mqtt")
    topic = f"{unique()}/billing"
    async with aiomqtt.Client(*where(url), protocol=aiomqtt.ProtocolVersion.V5) as sub:
        await sub.subscribe(topic, qos=1)
        async with make_harness(tmp_path, brokers=(("events", url),)) as h:
            key = await fire(h, {"broker": "events", "topic": topic, "body": [1, 2]})
        async with asyncio.timeout(10):
            message = await anext(aiter(sub.messages))
    assert json.loads(bytes(message.payload)) == [1, 2]  # type: ignore[arg-type]
    props = dict(message.properties.UserProperty)  # type: ignore[union-attr]
    assert props["Idempotency-Key"] == key
    assert props["Tickwork-Attempt"] == "1"
    assert props["Tickwork-Scheduled-At"] == rfc3339(START)


async def test_mqtt_3_gets_the_json_envelope() -> None:
    url = require("mqtt")
    topic = f"{unique()}/v3"
    async with aiomqtt.Client(*where(url)) as sub:
        await sub.subscribe(topic, qos=1)
        outcome = await publish(f"{url}?protocol=3.1.1",
                                {"broker": "events", "topic": topic, "body": {"a": 1}})
        assert isinstance(outcome, Success)
        async with asyncio.timeout(10):
            message = await anext(aiter(sub.messages))
    assert json.loads(bytes(message.payload)) == {  # type: ignore[arg-type]
        "body": {"a": 1},
        "tickwork": {"idempotency_key": "job-1:2030-01-02T03:04:05Z",
                     "scheduled_at": "2030-01-02T03:04:05Z", "attempt": 1, "job": "job-1"}}


# --- failures -----------------------------------------------------------------------------


async def test_rabbitmq_missing_exchange_is_retriable_and_the_channel_recovers() -> None:
    url = require("amqp")
    ex = PublishExecutor(ExecutorSettings(outbound_allow=LOCAL, brokers=(("events", url),)))
    try:
        missing = await ex.execute(make_context("publish", {"broker": "events",
                                                            "exchange": unique()}))
        assert isinstance(missing, Fail)
        assert missing.retriable
        assert "has no exchange" in missing.error
        ok = await ex.execute(make_context("publish", {"broker": "events", "exchange": "",
                                                       "routing_key": unique()}))
        assert isinstance(ok, Success), ok
        client = ex.client("events")
        assert client is not None
        assert client.connects == 1  # the channel was reopened, the connection kept
    finally:
        await ex.close()


async def test_nats_subject_without_a_stream_is_retriable() -> None:
    url = require("nats")
    outcome = await publish(url, {"broker": "events", "subject": f"{unique('.')}.x"})
    assert isinstance(outcome, Fail)
    assert outcome.retriable
    assert "no stream takes subject" in outcome.error


async def test_a_broker_that_does_not_answer_is_retriable() -> None:
    outcome = await publish("amqp://guest:secretpw@127.0.0.1:1/", {"broker": "events",
                                                                 "exchange": "x"})
    assert isinstance(outcome, Fail)
    assert outcome.retriable
    assert "secretpw" not in outcome.error


async def publish_clients(url: str) -> set[str]:
    """The ids of the Redis server's connections named as the executor names its own (other
    processes may hold some: only the new ones are this test's)."""
    redis = Redis.from_url(url, decode_responses=True)
    try:
        return {c["id"] for c in await redis.client_list() if c["name"] == "tickwork-publish"}
    finally:
        await redis.aclose()


@pytest.mark.parametrize("family", ["redis", "amqp", "nats", "mqtt"])
async def test_one_connection_serves_every_firing(family: str) -> None:
    url = require(family)
    destination: dict[str, Any] = {
        "redis": {"stream": unique()}, "amqp": {"exchange": "", "routing_key": unique()},
        "mqtt": {"topic": unique()}, "nats": {"subject": unique(".")}}[family]
    stream_name = unique("_")
    nc = None
    if family == "nats":
        nc = await nats.connect(url)
        await nc.jetstream().add_stream(StreamConfig(name=stream_name,
                                                     subjects=[destination["subject"]]))
    ex = PublishExecutor(ExecutorSettings(outbound_allow=LOCAL, brokers=(("events", url),)))
    before = await publish_clients(url) if family == "redis" else set()
    try:
        for attempt in range(1, 6):
            outcome = await ex.execute(make_context(
                "publish", {"broker": "events", **destination, "body": attempt},
                attempt=attempt))
            assert isinstance(outcome, Success), outcome
        client = ex.client("events")
        assert client is not None
        assert client.connects == 1
        if family == "redis":  # the server's own count: one connection of ours, new
            assert len(await publish_clients(url) - before) == 1
            redis = Redis.from_url(url, decode_responses=True)
            await redis.delete(destination["stream"])
            await redis.aclose()
    finally:
        await ex.close()
        if nc is not None:
            await nc.jetstream().delete_stream(stream_name)
            await nc.close()


@pytest.mark.parametrize("url", [
    "redis://127.0.0.1:6379/0", "amqp://guest:guest@127.0.0.1:5672/", "nats://127.0.0.1:4222",
    "mqtt://127.0.0.1:1883", "mqtt://localhost:1883", "amqp://guest:guest@[::ffff:127.0.0.1]/",
    "redis://2130706433:6379/0", "nats://169.254.169.254:4222",
])
async def test_the_outbound_guard_refuses_internal_brokers(url: str) -> None:
    destination = {"redis": "stream", "amqp": "exchange", "nats": "subject",
                   "mqtt": "topic"}[url.partition(":")[0]]
    outcome = await publish(url, {"broker": "events", destination: "x"}, allow=())
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert "refused to connect to" in outcome.error
    assert "allow it with outbound_allow" in outcome.error


async def test_a_worker_without_the_extra_refuses_with_the_extra_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiormq", None)  # import aiormq raises ImportError
    outcome = await publish("amqp://guest:guest@127.0.0.1:5672/",
                            {"broker": "events", "exchange": "x"})
    assert outcome == Fail("broker 'events': publish jobs need aiormq: install the brokers "
                           "extra: pip install 'tickwork[brokers]'", retriable=False)


async def test_an_unknown_broker_on_the_worker_is_fatal() -> None:
    outcome = await publish("nats://127.0.0.1:4222", {"broker": "other", "subject": "x"})
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert "not configured on this worker" in outcome.error


# --- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize(("payload", "field"), [
    ({"exchange": "x"}, "payload.broker"),
    ({"broker": "events"}, "payload.exchange"),
    ({"broker": "events", "exchange": "x", "topic": "t"}, "payload.topic"),
    ({"broker": "events", "topic": "a/#"}, "payload.topic"),
    ({"broker": "events", "subject": "a.*"}, "payload.subject"),
    ({"broker": "events", "subject": "a", "routing_key": "k"}, "payload.routing_key"),
    ({"broker": "events", "stream": "s", "maxlen": 0}, "payload.maxlen"),
    ({"broker": "events", "topic": "t", "maxlen": 5}, "payload.maxlen"),
    ({"broker": "events", "stream": "s", "body": float("nan")}, "payload.body"),
    ({"broker": "events", "stream": "s", "url": "amqp://x"}, "payload.url"),
])
def test_payload_errors_name_the_field(payload: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        validate_payload("publish", payload)
    assert err.value.field == field


BROKERS = (("events", "amqp://guest:guest@127.0.0.1:5672/"), ("stream", "redis://r:6379/0"))


@pytest.mark.parametrize(("payload", "field", "says"), [
    ({"broker": "nope", "exchange": "x"}, "payload.broker", "unknown broker 'nope'"),
    ({"broker": "events", "subject": "x"}, "payload.exchange", "RabbitMQ"),
    ({"broker": "stream", "topic": "x"}, "payload.stream", "Redis"),
])
async def test_creation_checks_the_broker_name_and_destination(
        tmp_path: Path, payload: dict[str, Any], field: str, says: str) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/p.db")
    await store.migrate()
    client = AsyncClient(store, policy=JobPolicy(ExecutorSettings(brokers=BROKERS),
                                                 runs_jobs=False))
    try:
        with pytest.raises(ValidationError) as err:
            await client.create_job({"name": "p", "schedule": {"every": "1m"},
                                     "kind": "publish", "payload": payload})
        assert err.value.field == field
        assert says in str(err.value)
        await client.create_job({"name": "ok", "schedule": {"every": "1m"}, "kind": "publish",
                                 "payload": {"broker": "events", "exchange": "jobs"}})
    finally:
        await store.close()


def test_brokers_come_from_env_and_toml(tmp_path: Path) -> None:
    env = {"TICKWORK_BROKERS": '{"events": "amqp://guest:guest@127.0.0.1:5672/", '
                               '"cache": {"$secret": "redis-url"}}'}
    settings = load_settings(env=env, toml_path=None)
    assert dict(settings.executors.brokers) == {
        "events": "amqp://guest:guest@127.0.0.1:5672/", "cache": "$secret:redis-url"}
    assert "guest" not in repr(settings)
    toml = tmp_path / "t.toml"
    toml.write_text('[brokers]\nevents = "nats://n:4222"\n')
    assert load_settings(env={}, toml_path=str(toml)).executors.brokers == (
        ("events", "nats://n:4222"),)
    with pytest.raises(ConfigError, match="not a broker URL scheme"):
        load_settings(env={"TICKWORK_BROKERS": '{"events": "http://x"}'})
    with pytest.raises(ConfigError, match=r"executors\.brokers"):
        load_settings(env={"TICKWORK_BROKERS": '{"events": {"$secret": "no spaces"}}'})


def test_the_documented_brokers_table_loads(tmp_path: Path) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "executors.md"
    [toml] = [b for b in re.findall(r"```toml\n(.*?)```", docs.read_text("utf-8"), re.DOTALL)
              if "[brokers]" in b]
    path = tmp_path / "b.toml"
    path.write_text(toml)
    brokers = dict(load_settings(env={}, toml_path=str(path)).executors.brokers)
    assert set(brokers) == {"events", "stream", "bus", "iot"}
    assert brokers["bus"] == "$secret:nats-url"


def test_the_envelope_carries_what_headers_carry() -> None:
    message = message_for(make_context("publish", {}), {"x": 1})
    assert json.loads(envelope(message)) == {
        "body": {"x": 1}, "tickwork": {"idempotency_key": "job-1:2030-01-02T03:04:05Z",
                                       "scheduled_at": "2030-01-02T03:04:05Z", "attempt": 1,
                                       "job": "job-1"}}


@pytest.mark.parametrize("family", ["amqp", "nats"])
async def test_a_lost_connection_is_opened_again_on_the_next_firing(family: str) -> None:
    url = require(family)
    stream_name, subject = unique("_"), unique(".")
    destination = {"amqp": {"exchange": "", "routing_key": unique()},
                   "nats": {"subject": subject}}[family]
    nc = None
    if family == "nats":
        nc = await nats.connect(url)
        await nc.jetstream().add_stream(StreamConfig(name=stream_name, subjects=[subject]))
    ex = PublishExecutor(ExecutorSettings(outbound_allow=LOCAL, brokers=(("events", url),)))
    try:
        payload = {"broker": "events", **destination}
        assert isinstance(await ex.execute(make_context("publish", payload)), Success)
        client: Any = ex.client("events")
        # The connection goes away under the pool, as when the broker restarts.
        await (client._connection if family == "amqp" else client._client).close()
        outcome = await ex.execute(make_context("publish", payload, attempt=2))
        assert isinstance(outcome, Success), outcome
        assert client.connects == 2
    finally:
        await ex.close()
        if nc is not None:
            await nc.jetstream().delete_stream(stream_name)
            await nc.close()
