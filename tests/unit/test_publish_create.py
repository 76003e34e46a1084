"""A publish job made end to end from the CLI and the REST API, on an interval with
``"offset": "auto"``: the document reads back as written, the description gives the job's own
offset, and a broker that is not configured (a name, or a URL smuggled in its place) is
refused with the field named (exit status 2, 422). The dashboard's form is checked in
tests/processes/test_dashboard_publish.py."""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickwork.api import create_app
from tickwork.cli.main import main
from tickwork.client import AsyncClient
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.executors.admission import JobPolicy
from tickwork.executors.base import ExecutorSettings
from tickwork.metrics import Metrics

BROKERS = {"events": "redis://127.0.0.1:6379/0"}
DOC = {"name": "tick-publish", "schedule": {"every": "1m", "offset": "auto"},
       "kind": "publish",
       "payload": {"broker": "events", "stream": "ticks", "maxlen": 1000, "body": {"a": 1}}}
SMUGGLED = [
    ({"broker": "nope", "stream": "ticks"}, "payload.broker"),
    ({"broker": "redis://10.0.0.1:6379/0", "stream": "ticks"}, "payload.broker"),
    ({"broker": "events", "exchange": "jobs"}, "payload.stream"),  # Redis takes a stream
]


@pytest.fixture
def tw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    for key in [k for k in os.environ if k.startswith("TICKWORK_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TICKWORK_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")
    monkeypatch.setenv("TICKWORK_BROKERS", json.dumps(BROKERS))

    def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_the_cli_creates_and_shows_a_publish_job(tw: Any) -> None:
    code, out, err = tw("jobs", "create", "--json", "-", stdin=json.dumps(DOC))
    assert code == 0, err
    code, out, _ = tw("jobs", "show", "tick-publish", "--json", "--next", "2")
    shown = json.loads(out)
    assert shown["schedule"] == {"every": 60, "offset": "auto"}
    assert (shown["kind"], shown["payload"]) == ("publish", DOC["payload"])
    assert shown["description"].startswith("every minute (offset ")
    assert shown["description"].endswith(", auto)")
    first, second = shown["next_fire_times"]
    assert first[17:19] == second[17:19]  # one minute apart, at the job's own second


@pytest.mark.parametrize(("payload", "field"), SMUGGLED)
def test_the_cli_refuses_a_broker_it_does_not_know(tw: Any, payload: dict[str, Any],
                                                   field: str) -> None:
    code, _, err = tw("jobs", "create", "--json", "-",
                      stdin=json.dumps({**DOC, "payload": payload}))
    assert code == 2
    assert field in err
    assert "Traceback" not in err


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = SqliteStore(f"sqlite:///{tmp_path}/api.db")
    await store.migrate()
    policy = JobPolicy(ExecutorSettings(brokers=tuple(BROKERS.items())), runs_jobs=False)
    app = create_app(AsyncClient(store, policy=policy), open_access=True, metrics=Metrics())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1:8000") as client:
        yield client
    await store.close()


async def test_the_api_creates_and_previews_a_publish_job(http: httpx.AsyncClient) -> None:
    r = await http.post("/api/v1/jobs", json=DOC)
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["schedule"] == {"every": 60, "offset": "auto"}
    r = await http.get(f"/api/v1/jobs/{job['id']}/preview", params={"count": 2})
    preview = r.json()
    assert preview["description"].endswith(", auto)")
    assert preview["times"][0] == job["next_run_at"]
    r = await http.post("/api/v1/preview", json={"schedule": DOC["schedule"]})
    assert r.json()["description"] == "every minute (offset auto)"


@pytest.mark.parametrize(("payload", "field"), SMUGGLED)
async def test_the_api_refuses_a_broker_it_does_not_know(
        http: httpx.AsyncClient, payload: dict[str, Any], field: str) -> None:
    r = await http.post("/api/v1/jobs", json={**DOC, "payload": payload})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"] == field
