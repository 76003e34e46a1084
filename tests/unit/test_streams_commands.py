"""Job commands parsed, and the streams page's settings: no broker needed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tickwork.client import AsyncClient
from tickwork.config import load_settings
from tickwork.drivers import open_driver
from tickwork.errors import StoreError, ValidationError
from tickwork.metrics import Metrics
from tickwork.streams.commands import MAX_COMMAND_BYTES, parse_command, reply_to_of
from tickwork.streams.handling import CommandHandler
from tickwork.streams.sources import configured_sources

DOCS = Path(__file__).resolve().parents[2] / "docs" / "streams.md"
JOB = {"name": "report", "schedule": {"every": "1h"}, "kind": "http",
       "payload": {"url": "https://example.org/hook"}}


def body(**doc: object) -> bytes:
    return json.dumps(doc).encode()


def test_an_upsert_carries_its_parsed_job_version_and_reply_to() -> None:
    command = parse_command(body(op="upsert", job=JOB, version=7, reply_to="answers"))
    assert (command.op, command.name, command.version, command.reply_to) == \
        ("upsert", "report", 7, "answers")
    assert command.spec is not None
    assert command.spec.schedule.type == "every"


@pytest.mark.parametrize(("doc", "field"), [
    ({"op": "upsert", "job": JOB, "version": True}, "version"),
    ({"op": "upsert", "job": JOB, "version": 2**63}, "version"),
    ({"op": "upsert", "job": JOB, "version": "7"}, "version"),
    ({"op": "upsert", "job": JOB, "reply_to": "two words"}, "reply_to"),
    ({"op": "upsert", "job": JOB, "reply_to": "x" * 256}, "reply_to"),
    ({"op": "upsert"}, "job"),
    ({"op": "upsert", "job": {**JOB, "kind": "ftp"}}, "job.kind"),
    ({"op": "pause"}, "name"),
    ({"op": "pause", "name": ""}, "name"),
    ({"op": "trigger", "name": "x", "version": 3}, "version"),  # only upserts and deletes
    ({"op": "Upsert", "job": JOB}, "op"),
])
def test_a_bad_command_names_its_field(doc: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_command(json.dumps(doc).encode())
    assert caught.value.field == field


def test_size_and_nesting_are_bounded() -> None:
    with pytest.raises(ValidationError, match="at most"):
        parse_command(b" " * (MAX_COMMAND_BYTES + 1))
    with pytest.raises(ValidationError, match="not JSON"):
        parse_command(b"[" * 100_000)


def test_the_reply_to_of_a_refused_command_is_read_when_it_can_be() -> None:
    assert reply_to_of(body(op="explode", reply_to="answers")) == "answers"
    assert reply_to_of(body(op="explode", reply_to="has space")) is None
    assert reply_to_of(b"{oops") is None


def test_the_documented_settings_load(tmp_path: Path) -> None:
    toml = re.findall(r"```toml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)[0]
    path = tmp_path / "tickwork.toml"
    path.write_text(toml, encoding="utf-8")
    settings = load_settings(env={}, toml_path=str(path))
    assert [(s.broker, s.source) for s in configured_sources(settings)] == [
        ("events", "tickwork.commands"), ("rabbit", "tickwork.commands"),
        ("js", "tickwork.commands")]
    assert settings.executors.outbound_allow == ("127.0.0.1",)


async def test_a_store_that_cannot_be_reached_leaves_the_command_for_later() -> None:
    """Raised, not dead-lettered: the source leaves the message unacknowledged."""
    store = open_driver("postgresql://tickwork@127.0.0.1:1/nothing").store
    metrics = Metrics()
    handler = CommandHandler(AsyncClient(store), source="b/s", metrics=metrics)
    try:
        with pytest.raises(StoreError):
            await handler.handle(body(op="upsert", job=JOB, version=1))
    finally:
        await store.close()
    assert metrics.commands == {}


def test_a_command_names_its_namespace() -> None:
    assert parse_command(body(op="pause", name="report")).namespace == "default"
    command = parse_command(body(op="upsert", job=JOB, version=1, namespace="acme"))
    assert (command.name, command.namespace) == ("report", "acme")
    with pytest.raises(ValidationError) as caught:
        parse_command(body(op="trigger", name="report", namespace="Not Valid"))
    assert caught.value.field == "namespace"


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_one_job_name_in_two_namespaces_keeps_two_versions(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Versions order the changes to one name of one namespace: acme's version 5 does not
    hold back globex's version 1, nor the command without a namespace (default's)."""
    url = (f"sqlite:///{tmp_path}/tickwork.db" if backend == "sqlite"
           else request.getfixturevalue("postgres_url"))
    client = await AsyncClient.open(url)
    handler = CommandHandler(client, source="b/s")
    try:
        def upsert(version: int, priority: int, **where: str) -> bytes:
            return body(op="upsert", job={**JOB, "priority": priority}, version=version,
                        **where)

        assert (await handler.handle(upsert(5, 1, namespace="acme"))).outcome == "applied"
        assert (await handler.handle(upsert(1, 2, namespace="globex"))).outcome == "applied"
        assert (await handler.handle(upsert(2, 3))).outcome == "applied"
        stale = await handler.handle(upsert(4, 9, namespace="acme"))
        assert stale.outcome == "stale"
        assert json.loads(stale.reply)["job"]["namespace"] == "acme"
        assert (await handler.handle(upsert(2, 4, namespace="globex"))).outcome == "applied"
        versions = [await client.store.job_version_get("report", ns)
                    for ns in ("acme", "globex", "default")]
        assert versions == [5, 2, 2]
        jobs = {ns: await client.scoped(ns).get_job("report")
                for ns in ("acme", "globex", "default")}
        assert {ns: j.spec.priority for ns, j in jobs.items()} == {
            "acme": 1, "globex": 4, "default": 3}
        assert len({j.id for j in jobs.values()}) == 3
        paused = await handler.handle(body(op="pause", name="report", namespace="globex"))
        assert paused.outcome == "applied"
        assert (await client.scoped("globex").get_job("report")).spec.paused
        assert not (await client.scoped("acme").get_job("report")).spec.paused
        deleted = await handler.handle(body(op="delete", name="report", version=6,
                                            namespace="acme"))
        assert deleted.outcome == "applied"
        late = await handler.handle(upsert(6, 1, namespace="acme"))
        assert late.outcome == "stale"  # a late copy does not bring acme's back
        assert (await client.scoped("globex").get_job("report")).spec.priority == 4
    finally:
        await client.close()
