"""The publish alert channel against a real Redis Streams broker: an alert and its resolution
arrive as stream entries, a broker that is down is retried and recorded, and a channel that
names a broker the settings do not have is refused when the job (or the setting) is saved."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from test_alerts import DEAD, Receiver, World, receiver, sqlite_store  # noqa: F401  (fixtures)

from tickwork.client import AsyncClient
from tickwork.config import load_settings
from tickwork.drivers.base import Store
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError, ValidationError
from tickwork.executors import ExecutorSettings
from tickwork.executors.admission import JobPolicy
from tickwork.models import OccurrenceState
from tickwork.testing.brokers import require, unique


@pytest.fixture
async def stream() -> AsyncIterator[tuple[str, str]]:
    """The Redis URL and a stream name of this test's own, deleted afterwards."""
    url, name = require("redis"), unique()
    yield url, name
    redis = Redis.from_url(url)
    try:
        await redis.delete(name)
    finally:
        await redis.aclose()


async def entries(url: str, name: str) -> list[dict[str, str]]:
    redis = Redis.from_url(url, decode_responses=True)
    try:
        return [fields for _, fields in await redis.xrange(name)]
    finally:
        await redis.aclose()


async def test_an_alert_and_its_resolution_are_published(
        sqlite_store: Store, receiver: Receiver,  # noqa: F811
        stream: tuple[str, str]) -> None:
    url, name = stream
    w = World(sqlite_store, receiver, brokers=(("events", url),))
    try:
        job = await w.job({"channels": [{"kind": "publish", "broker": "events",
                                          "stream": name, "maxlen": 100}]})
        await w.run(job, 0, DEAD)
        [alert] = await w.judge(1)
        assert [(d.kind, d.state, d.attempts) for d in alert.deliveries] == [
            ("publish", "delivered", 1)]
        await w.run(job, 60, OccurrenceState.SUCCEEDED)
        [alert] = await w.judge(61)
    finally:
        await w.close()
    assert alert.state == "resolved"
    fired, resolved = await entries(url, name)
    body = json.loads(fired["body"])
    assert (body["type"], body["job_id"], body["job_name"], body["condition"]) == (
        "alert.firing", job.id, "nightly", "failed")
    assert "ended dead" in body["detail"]
    assert fired["idempotency_key"] == f"alert:{alert.deliveries[0].id}"
    assert json.loads(resolved["body"])["type"] == "alert.resolved"
    assert receiver.seen == []  # the publish channel only


async def test_a_broker_that_is_down_is_retried_and_recorded(
        sqlite_store: Store, receiver: Receiver,  # noqa: F811
        stream: tuple[str, str]) -> None:
    url, name = stream
    w = World(sqlite_store, receiver, brokers=(("events", url), ("down", "redis://127.0.0.1:1/0")))
    try:
        job = await w.job({"channels": [
            {"kind": "publish", "broker": "down", "stream": name},
            {"kind": "publish", "broker": "events", "stream": name}]})
        await w.run(job, 0, DEAD)
        [alert] = await w.judge(1)
        assert [(d.state, d.attempts) for d in alert.deliveries] == [
            ("pending", 1), ("delivered", 1)]
        assert "broker 'down'" in (alert.deliveries[0].last_error or "")
        await w.judge(11)  # second try, after the 10 s backoff
        [alert] = await w.judge(31)  # third and last (backoff 20 s)
    finally:
        await w.close()
    assert (alert.deliveries[0].state, alert.deliveries[0].attempts) == ("failed", 3)
    assert len(await entries(url, name)) == 1  # the working channel was sent once


@pytest.mark.parametrize(("channel", "field", "says"), [
    ({"broker": "nope", "stream": "s"}, "alerts.channels[1].broker", "unknown broker 'nope'"),
    ({"broker": "events", "subject": "s"}, "alerts.channels[1].stream", "Redis"),
])
async def test_a_channel_the_settings_cannot_send_is_refused_at_save(
        tmp_path: Path, channel: dict[str, Any], field: str, says: str) -> None:
    s = SqliteStore(f"sqlite:///{tmp_path}/p.db")
    await s.migrate()
    brokers = (("events", "redis://127.0.0.1:6379/0"),)
    client = AsyncClient(s, policy=JobPolicy(ExecutorSettings(brokers=brokers),
                                             runs_jobs=False))
    doc = {"name": "p", "schedule": {"every": "1m"}, "kind": "http",
           "payload": {"url": "https://example.org/x"}}
    hook = {"kind": "webhook", "url": "https://example.org/alerts"}
    try:
        with pytest.raises(ValidationError) as err:
            await client.create_job({**doc, "alerts": {
                "channels": [hook, {"kind": "publish", **channel}]}})
        assert err.value.field == field
        assert says in str(err.value)
        job = await client.create_job({**doc, "alerts": {"channels": [
            hook, {"kind": "publish", "broker": "events", "stream": "alerts"}]}})
        assert json.loads(job.spec.alerts or "")["channels"][1] == {
            "kind": "publish", "broker": "events", "stream": "alerts"}
    finally:
        await s.close()


def test_a_publish_channel_takes_the_publish_fields_only() -> None:
    from tickwork.document import parse_job_document

    with pytest.raises(ValidationError) as err:
        parse_job_document({"name": "x", "schedule": {"every": "1m"}, "kind": "http",
                            "payload": {"url": "https://example.org/x"}, "alerts": {
                                "channels": [{"kind": "publish", "broker": "events",
                                              "stream": "s", "body": {}}]}})
    assert err.value.field == "alerts.channels[0]"
    assert "unknown field 'body'" in str(err.value)


def test_alert_defaults_name_only_configured_brokers() -> None:
    defaults = json.dumps({"all": {"channels": [
        {"kind": "publish", "broker": "nope", "stream": "alerts"}]}})
    env = {"TICKWORK_ALERT_DEFAULTS": defaults}
    with pytest.raises(ConfigError) as err:
        load_settings(env=env)
    assert err.value.field == "alert_defaults.all.channels[0].broker"
    env["TICKWORK_BROKERS"] = json.dumps({"nope": "redis://127.0.0.1:6379/0"})
    settings = load_settings(env=env)
    assert settings.alert_defaults == defaults
