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
