"""Logs: one configuration (tickwork.logs.configure), ISO 8601 UTC times with milliseconds, a
text and a JSON format; the run log's structured fields; the API's access log."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tickwork.api.app import create_app
from tickwork.api.auth import create_token
from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.config import load_settings
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError
from tickwork.logs import configure, utc_timestamp
from tickwork.testing.harness import Harness
from tickwork.worker.runlog import RunLog

TEXT_LINE = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (INFO|WARNING|ERROR|DEBUG) +(\S+): (.*)")
RUN_FIELDS = {"job", "job_id", "occurrence_key", "attempt", "queue", "kind", "state", "outcome"}


@pytest.fixture
def configured() -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """A text and a JSON handler on the root logger, each writing to a buffer; removed after."""
    root = logging.getLogger()
    level = root.level
    text, data = io.StringIO(), io.StringIO()
    json_handler = configure("debug", "json", stream=data)
    json_handler.set_name("json-test")  # a second configure() must not remove it
    text_handler = configure("debug", "text", stream=text)
    yield text, data
    for handler in (text_handler, json_handler):
        root.removeHandler(handler)
    root.setLevel(level)
    logging.getLogger("uvicorn.access").disabled = False


def test_utc_timestamps_have_milliseconds_and_z() -> None:
    assert utc_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert utc_timestamp(1740830400.1239) == "2025-03-01T12:00:00.123Z"


def test_a_text_line_and_a_json_line(configured: tuple[io.StringIO, io.StringIO]) -> None:
    text, data = configured
    logging.getLogger("tickwork.test").warning("hello %s", "world", extra={"job": "nightly"})
    line = text.getvalue().splitlines()[-1]
    m = TEXT_LINE.fullmatch(line)
    assert m is not None, line
    assert m.group(2, 3, 4) == ("WARNING", "tickwork.test", "hello world")
    assert "nightly" not in line  # structured fields stay out of the text format
    record = json.loads(data.getvalue().splitlines()[-1])
    assert record == {"time": m.group(1), "level": "WARNING", "logger": "tickwork.test",
                      "message": "hello world", "job": "nightly"}


def test_json_carries_the_traceback(configured: tuple[io.StringIO, io.StringIO]) -> None:
    _, data = configured
    try:
        raise ValueError("kaput")
    except ValueError:
        logging.getLogger("tickwork.test").exception("it broke")
    record = json.loads(data.getvalue().splitlines()[-1])
    assert record["level"] == "ERROR"
    assert record["exception"].endswith("ValueError: kaput")


async def test_run_lines_carry_the_attempt_as_fields(
        harness: Harness, configured: tuple[io.StringIO, io.StringIO]) -> None:
    h = harness
    _, data = configured
    h.pool.run_log = RunLog(summary_seconds=0)
    job = await h.client.create_job({
        "name": "flaky", "schedule": {"at": h.clock.now().isoformat()}, "kind": "python",
        "queue": "default", "payload": {"callable": "tickwork.testing.jobs:boom",
                                        "args": ["kaput"]},
        "retry": {"max_attempts": 2}})
    await h.tick()
    await h.completed()
    lines = [json.loads(line) for line in data.getvalue().splitlines()]
    runs = [r for r in lines if r["logger"] == "tickwork.runs"]
    assert len(runs) == 1, lines
    run = runs[0]
    assert run.keys() >= RUN_FIELDS
    assert run["level"] == "WARNING"
    assert (run["job"], run["job_id"], run["attempt"], run["queue"], run["kind"]) == (
        "flaky", job.id, 1, "default", "python")
    assert (run["state"], run["outcome"]) == ("retrying", "failed")
    assert run["occurrence_key"].startswith(f"{job.id}:")
    assert "kaput" in run["message"]


def test_log_format_is_a_checked_setting() -> None:
    assert load_settings(env={}).log_format == "text"
    assert load_settings(env={"TICKWORK_LOG_FORMAT": "JSON"}).log_format == "json"
    with pytest.raises(ConfigError) as info:
        load_settings(env={"TICKWORK_LOG_FORMAT": "xml"})
    assert str(info.value) == "log_format: must be one of text, json (got 'xml')"


def test_the_cli_refuses_an_unknown_log_format(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from tickwork.cli.main import main

    monkeypatch.setenv("TICKWORK_LOG_FORMAT", "xml")
    assert main(["jobs", "list", "--database", "sqlite://:memory:"]) == 2
    assert capsys.readouterr().err == ("tickwork: error: log_format: must be one of text, json "
                                       "(got 'xml' from TICKWORK_LOG_FORMAT)\n")


async def test_the_access_log_line_of_a_request(
        tmp_path: Path, configured: tuple[io.StringIO, io.StringIO]) -> None:
    text, data = configured
    store = SqliteStore(f"sqlite:///{tmp_path}/api.db")
    await store.migrate()
    client = AsyncClient(store, clock=FakeClock())
    secret, _ = await create_token(client, "ci-reader", "read")
    app = create_app(client, access_log=True)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1:8000") as http:
            r = await http.get("/api/v1/jobs?limit=5&api_key=hunter2",
                               headers={"Authorization": f"Bearer {secret}"})
            assert r.status_code == 200, r.text
            assert (await http.get("/api/v1/jobs")).status_code == 401
    finally:
        await store.close()
    access = [json.loads(line) for line in data.getvalue().splitlines()
              if '"tickwork.api.access"' in line]
    assert len(access) == 2, data.getvalue()
    first, second = access
    assert first["level"] == "INFO"
    assert (first["method"], first["path"], first["status"], first["token"]) == (
        "GET", "/api/v1/jobs?limit=5&api_key=***", 200, "ci-reader")
    assert isinstance(first["duration_ms"], float)
    assert (second["status"], second["token"]) == (401, None)
    lines = [line for line in text.getvalue().splitlines() if "tickwork.api.access" in line]
    assert "hunter2" not in "".join(lines) + json.dumps(access)
    m = TEXT_LINE.fullmatch(lines[0])
    assert m is not None
    assert re.fullmatch(r"GET /api/v1/jobs\?limit=5&api_key=\*\*\* 200 \d+\.\dms "
                        r"token=ci-reader", m.group(4)), lines[0]


async def test_no_access_log_unless_asked(
        tmp_path: Path, configured: tuple[io.StringIO, io.StringIO]) -> None:
    _, data = configured
    store = SqliteStore(f"sqlite:///{tmp_path}/api.db")
    await store.migrate()
    app = create_app(AsyncClient(store, clock=FakeClock()))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1:8000") as http:
            assert (await http.get("/api/v1/jobs")).status_code == 401
    finally:
        await store.close()
    assert "tickwork.api.access" not in data.getvalue()
