"""Job commands consumed from the real brokers: Redis Streams, RabbitMQ, NATS JetStream.

Each test sends commands on a source of its own, runs the source's passes until they are
handled, and judges the store, the replies and the dead letters.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from tickwork.client import AsyncClient
from tickwork.clock import SystemClock
from tickwork.config import Settings
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError, JobNotFound
from tickwork.executors import ExecutorSettings
from tickwork.executors.admission import JobPolicy
from tickwork.metrics import CONSUMER, Metrics
from tickwork.streams import open_sources
from tickwork.streams.sources import StreamSource
from tickwork.testing.streams import Commands, until

FAMILIES = ("redis", "amqp", "nats")
LOCAL = ("127.0.0.1",)


def job(name: str = "report", **more: Any) -> dict[str, Any]:
    return {"name": name, "schedule": {"cron": "0 3 * * *"}, "kind": "http",
            "payload": {"url": "https://example.org/hook"}, **more}


@dataclass
class Rig:
    commands: Commands
    source: StreamSource
    client: AsyncClient
    metrics: Metrics

    async def run(self, *bodies: bytes | dict[str, Any], answers: int | None = None) -> None:
        """Send ``bodies`` and consume until each has been answered or dead-lettered."""
        before = len(await self.commands.replies()) + len(await self.commands.dead_letters())
        for body in bodies:
            await self.commands.send(body)
        want = before + (len(bodies) if answers is None else answers)

        async def done() -> bool:
            seen = len(await self.commands.replies()) + len(await self.commands.dead_letters())
            return seen >= want

        await until(done, self.source.consume_once)

    async def replies(self) -> list[dict[str, Any]]:
        return [json.loads(body) for body, _ in await self.commands.replies()]


def settings_for(commands: Commands, **executors: Any) -> Settings:
    return Settings(consume=(f"cmds/{commands.source}",), executors=ExecutorSettings(
        outbound_allow=executors.pop("allow", LOCAL), brokers=(("cmds", commands.url),),
        **executors))


@pytest.fixture(params=FAMILIES)
async def rig(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rig]:
    commands = await Commands.open(request.param)
    store = SqliteStore(f"sqlite:///{tmp_path}/t.db")
    await store.migrate()
    settings = settings_for(commands)
    # As in `tickwork run`: the process's own workers run what it creates.
    client = AsyncClient(store, policy=JobPolicy(settings.executors, runs_jobs=True))
    metrics = Metrics()
    [source] = await open_sources(settings, client=client, clock=SystemClock(),
                                  metrics=metrics)
    try:
        yield Rig(commands, source, client, metrics)
    finally:
        await source.close()
        await client.close()
        await commands.close()


def with_reply(rig: Rig, command: dict[str, Any]) -> dict[str, Any]:
    return {**command, "reply_to": rig.commands.reply}


async def test_upsert_creates_then_updates_in_version_order(rig: Rig) -> None:
    await rig.run(with_reply(rig, {"op": "upsert", "job": job(priority=1), "version": 1}))
    created = await rig.client.get_job("report")
    assert created.spec.priority == 1
    await rig.run(with_reply(rig, {"op": "upsert", "job": job(priority=3), "version": 3}),
                  with_reply(rig, {"op": "upsert", "job": job(priority=2), "version": 2}))
    updated = await rig.client.get_job("report")
    assert (updated.id, updated.spec.priority) == (created.id, 3)  # 2 came late: not written
    assert await rig.client.store.job_version_get("report") == 3
    first, newer, older = await rig.replies()
    assert (first["ok"], first["created"], first["job"]["priority"]) == (True, True, 1)
    assert (newer["applied"], newer["created"], newer["job"]["priority"]) == (True, False, 3)
    assert (older["ok"], older["applied"], older["applied_version"]) == (True, False, 3)
    assert older["job"]["priority"] == 3
    assert rig.metrics.commands == {(rig.source.config.label, "applied"): 2,
                                    (rig.source.config.label, "stale"): 1}


async def test_upsert_replaces_the_whole_document(rig: Rig) -> None:
    await rig.run({"op": "upsert", "job": job(tags=["a"], priority=4)}, answers=0)
    await until(lambda: _exists(rig.client, "report"), rig.source.consume_once)
    await rig.run(with_reply(rig, {"op": "upsert", "job": job()}))
    spec = (await rig.client.get_job("report")).spec
    assert (spec.tags, spec.priority) == ((), 0)  # left out: the defaults, not the old values


async def _exists(client: AsyncClient, name: str) -> bool:
    try:
        await client.get_job(name)
    except JobNotFound:
        return False
    return True


async def test_pause_resume_trigger_and_delete(rig: Rig) -> None:
    await rig.run(with_reply(rig, {"op": "upsert", "job": job(), "version": 1}),
                  with_reply(rig, {"op": "pause", "name": "report"}))
    assert (await rig.client.get_job("report")).spec.paused
    await rig.run(with_reply(rig, {"op": "resume", "name": "report"}),
                  with_reply(rig, {"op": "trigger", "name": "report"}))
    assert not (await rig.client.get_job("report")).spec.paused
    runs = await rig.client.list_runs(job="report")
    assert [r.trigger.value for r in runs] == ["manual"]
    await rig.run(with_reply(rig, {"op": "delete", "name": "report", "version": 2}))
    assert not await _exists(rig.client, "report")
    # A late copy of the first upsert does not bring the deleted job back.
    await rig.run(with_reply(rig, {"op": "upsert", "job": job(), "version": 1}))
    assert not await _exists(rig.client, "report")
    await rig.run(with_reply(rig, {"op": "delete", "name": "report"}))  # a redelivery, say
    replies = await rig.replies()
    assert [r.get("op") for r in replies] == ["upsert", "pause", "resume", "trigger",
                                              "delete", "upsert", "delete"]
    assert [r["ok"] for r in replies] == [True] * 7
    assert [r["applied"] for r in replies] == [True] * 5 + [False, False]
    assert replies[3]["run"]["trigger"] == "manual"
    assert replies[-1]["reason"] == "no job named 'report'"
    assert await rig.commands.dead_letters() == []


BAD = [
    (b"{not json", "", "not JSON"),
    (b"\xff\xfe", "", "not UTF-8"),
    (b'["upsert"]', "", "a JSON object"),
    (b'{"op": "explode", "name": "x"}', "op", "must be one of"),
    (b'{"op": "upsert", "job": {"name": "x", "kind": "http"}}', "job.schedule", ""),
    (b'{"op": "upsert", "job": {"name": "x", "schedule": {"cron": "61 * * * *"}, '
     b'"kind": "http", "payload": {"url": "https://example.org"}}}', "job.schedule.cron", ""),
    (b'{"op": "delete", "name": "x", "verison": 3}', "verison", "not a field"),
    (b'{"op": "upsert", "job": {}, "version": -1}', "version", "whole number"),
    (b'{"op": "pause", "name": "nobody"}', "", "no job named 'nobody'"),
]


@pytest.mark.parametrize(("body", "field", "words"), BAD)
async def test_a_bad_command_is_dead_lettered_with_its_error(
        rig: Rig, body: bytes, field: str, words: str) -> None:
    await rig.run(body)
    [(kept, meta)] = await rig.commands.dead_letters()
    assert kept == body  # the original, byte for byte
    error = meta.get("error") or meta.get("x-tickwork-error") or meta.get("Tickwork-Error")
    assert error is not None
    assert words in error
    if field:
        assert error.startswith(field)
    assert rig.metrics.commands == {(rig.source.config.label, "dead"): 1}
    assert 'tickwork_commands_dead_lettered_total{source="cmds/' in \
        rig.metrics.render_process(CONSUMER)


async def test_a_bad_command_does_not_block_the_ones_after_it(rig: Rig) -> None:
    await rig.run(b"{oops", with_reply(rig, {"op": "upsert", "job": job()}))
    assert await _exists(rig.client, "report")
    assert len(await rig.commands.dead_letters()) == 1


async def test_a_refused_command_gets_its_error_as_reply(rig: Rig) -> None:
    await rig.run(json.dumps({"op": "trigger", "name": "ghost",
                              "reply_to": rig.commands.reply}).encode(), answers=2)
    [reply] = await rig.replies()
    assert reply == {"ok": False, "error": "trigger: no job named 'ghost'", "op": "trigger",
                     "name": "ghost"}


async def test_a_job_the_allowlist_refuses_is_dead_lettered(rig: Rig) -> None:
    shell = {"name": "sneaky", "schedule": {"every": "1m"}, "kind": "shell",
             "payload": {"command": ["/bin/rm", "-rf", "/"]}}
    py = {"name": "sneaky2", "schedule": {"every": "1m"}, "kind": "python",
          "payload": {"callable": "os:system", "args": ["id"]}}
    await rig.run(with_reply(rig, {"op": "upsert", "job": shell}),
                  with_reply(rig, {"op": "upsert", "job": py}), answers=4)
    assert not await _exists(rig.client, "sneaky")
    assert not await _exists(rig.client, "sneaky2")
    assert [r["ok"] for r in await rig.replies()] == [False, False]
    assert len(await rig.commands.dead_letters()) == 2


async def test_a_broker_host_outside_the_allowlist_is_refused(tmp_path: Path) -> None:
    commands = await Commands.open("redis")
    store = SqliteStore(f"sqlite:///{tmp_path}/t.db")
    try:
        await store.migrate()
        settings = settings_for(commands, allow=())
        client = AsyncClient(store)
        [source] = await open_sources(settings, client=client, clock=SystemClock())
        with pytest.raises(Exception, match="allow"):
            await source.consume_once()
    finally:
        await store.close()
        await commands.close()


def test_a_consume_entry_must_name_a_configured_consumable_broker() -> None:
    brokers = (("cmds", "redis://127.0.0.1:6379/0"), ("m", "mqtt://127.0.0.1"))
    with pytest.raises(ConfigError, match=r"not in executors\.brokers"):
        Settings(consume=("other/x",), executors=ExecutorSettings(brokers=brokers)).validate()
    with pytest.raises(ConfigError, match="BROKER/SOURCE"):
        Settings(consume=("cmds",), executors=ExecutorSettings(brokers=brokers)).validate()
    with pytest.raises(ConfigError, match="mqtt"):
        Settings(consume=("m/x",), executors=ExecutorSettings(brokers=brokers)).validate()
    Settings(consume=("cmds/x",), executors=ExecutorSettings(brokers=brokers)).validate()


@pytest.mark.parametrize("family", FAMILIES)
async def test_tickwork_run_consumes_what_its_settings_name(tmp_path: Path, family: str) -> None:
    from tickwork.runtime.embedded import EmbeddedService

    commands = await Commands.open(family)
    settings = replace(settings_for(commands), database=f"sqlite:///{tmp_path}/s.db",
                       api_enabled=False)
    service = EmbeddedService(settings)
    await service.start()
    try:
        await commands.send({"op": "upsert", "job": job(), "reply_to": commands.reply})
        await until(lambda: _exists(service.client, "report"), lambda: asyncio.sleep(0.05))
        assert service.client is not None
        await until(lambda: _answered(commands), lambda: asyncio.sleep(0.05))
        assert "tickwork_commands_total" in service.metrics.render(states={}, queues=[])
    finally:
        await service.stop()
        await commands.close()


async def _answered(commands: Commands) -> bool:
    return len(await commands.replies()) == 1


async def test_the_consume_process_applies_commands_and_reports(tmp_path: Path) -> None:
    from tickwork.runtime.consume import ConsumeProcess

    commands = await Commands.open("redis")
    settings = replace(settings_for(commands), database=f"sqlite:///{tmp_path}/s.db")
    process = ConsumeProcess(settings)
    await process.start()
    try:
        await commands.send({"op": "upsert", "job": job(), "reply_to": commands.reply})
        await until(lambda: _answered(commands), lambda: asyncio.sleep(0.05))
        assert process.client is not None
        assert await _exists(process.client, "report")
        health = await process.health()
        assert (health["status"], health["sources"]) == ("ok", [f"cmds/{commands.source}"])
        assert 'outcome="applied"' in await process.metrics_text()
    finally:
        await process.stop()
        await commands.close()


def test_the_consume_process_needs_a_source() -> None:
    from tickwork.runtime.consume import ConsumeProcess

    with pytest.raises(ConfigError, match="names no source"):
        ConsumeProcess(Settings())


@pytest.mark.parametrize("target", ["source", "dead", "{tickwork:default}:b0", "tickwork:epoch"])
async def test_a_reply_to_the_commands_or_tickworks_own_keys_is_refused(
        rig: Rig, target: str) -> None:
    reply_to = {"source": rig.commands.source, "dead": rig.commands.dead}.get(target, target)
    body = json.dumps({"op": "upsert", "job": job(), "reply_to": reply_to}).encode()
    await rig.run(body)
    [(kept, meta)] = await rig.commands.dead_letters()
    assert kept == body
    assert not await _exists(rig.client, "report")  # not applied either
    error = meta.get("error") or meta.get("x-tickwork-error") or meta.get("Tickwork-Error")
    assert error is not None
    assert error.startswith("reply_to: must not")
    assert await rig.commands.replies() == []


async def test_a_source_whose_broker_is_down_backs_off(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/t.db")
    await store.migrate()
    settings = Settings(consume=("down/x",), executors=ExecutorSettings(
        outbound_allow=LOCAL, brokers=(("down", "redis://127.0.0.1:1/0"),)))
    client = AsyncClient(store)
    [source] = await open_sources(settings, client=client, clock=SystemClock())
    try:
        pauses = []
        for _ in range(7):
            with pytest.raises(Exception) as caught:  # noqa: PT011  (whatever redis-py raises)
                await source.tick(SystemClock().now())
            assert isinstance(caught.value, Exception)
            pauses.append(source.failed(caught.value))
        assert pauses == [1, 2, 4, 8, 16, 30, 30]
    finally:
        await source.close()
        await client.close()
