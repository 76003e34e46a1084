"""POST /api/v1/enqueue (one, and bulk) and GET /api/v1/retention over a real SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_api import Api, assert_problem, open_api

from tickwork.api import create_app
from tickwork.testing.harness import START

HOOK = {"method": "POST", "url": "https://example.org/hook", "body": {"order": 42}}


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    a, store = await open_api(tmp_path)
    yield a
    await a.http.aclose()
    await store.close()


async def test_enqueue_without_a_name_runs_now(api: Api) -> None:
    r = await api.post("/api/v1/enqueue", json={"kind": "http", "payload": HOOK})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["created"] is True
    job = body["job"]
    assert job["name"].startswith("http-")
    assert job["schedule"] == {"at": "2030-01-01T00:00:00Z"}
    assert job["next_run_at"] == "2030-01-01T00:00:00Z"
    again = await api.post("/api/v1/enqueue", json={"kind": "http", "payload": HOOK})
    assert again.json()["job"]["name"] != job["name"]


async def test_enqueue_dedupe_key_returns_the_existing_job(api: Api) -> None:
    req = {"kind": "http", "payload": HOOK, "at": "2030-01-01T01:00:00Z", "queue": "mail",
           "retry": {"max_attempts": 5}, "dedupe_key": "receipt-42",
           "dedupe_window_seconds": "10m"}
    first = await api.post("/api/v1/enqueue", json=req)
    assert first.status_code == 201, first.text
    assert (first.json()["job"]["queue"], first.json()["job"]["retry"]["max_attempts"]) == (
        "mail", 5)
    api.clock.advance(599)
    same = await api.post("/api/v1/enqueue", json=req)
    assert same.status_code == 200, same.text
    assert same.json() == {"created": False, "job": first.json()["job"]}
    api.clock.advance(1)
    later = await api.post("/api/v1/enqueue", json=req)
    assert later.status_code == 201
    assert later.json()["job"]["id"] != first.json()["job"]["id"]


async def test_enqueue_bulk_all_or_none(api: Api) -> None:
    items = [{"kind": "http", "payload": HOOK, "dedupe_key": "k"},
             {"kind": "http", "payload": HOOK, "dedupe_key": "k"},
             {"kind": "http", "payload": HOOK}]
    r = await api.post("/api/v1/enqueue/bulk", json=items)
    assert r.status_code == 201, r.text
    got = r.json()["items"]
    assert [i["created"] for i in got] == [True, False, True]
    assert got[0]["job"]["id"] == got[1]["job"]["id"]
    bad = [{"kind": "http", "payload": HOOK}, {"kind": "http", "payload": HOOK, "at": "soon"}]
    body = assert_problem(await api.post("/api/v1/enqueue/bulk", json=bad), 422)
    assert body["errors"][0]["field"] == "[1].at"
    assert len((await api.get("/api/v1/jobs")).json()["items"]) == 2


@pytest.mark.parametrize(("request_body", "field"), [
    ({"payload": HOOK}, "kind"),
    ({"kind": "http", "payload": HOOK, "schedule": {"cron": "* * * * *"}}, "schedule"),
    ({"kind": "http", "payload": HOOK, "at": "2029-12-31T22:00:00Z"}, "at"),
    ({"kind": "http", "payload": HOOK, "dedupe_key": ""}, "dedupe_key"),
    ({"kind": "http", "payload": HOOK, "dedupe_window_seconds": 0}, "dedupe_window_seconds"),
    ({"kind": "http", "payload": HOOK, "dedupe_window_seconds": "90d"},
     "dedupe_window_seconds"),
    ({"kind": "http", "payload": {"url": "file:///etc/passwd"}}, "payload.url"),
])
async def test_enqueue_bad_requests_name_the_field(api: Api, request_body: object,
                                                   field: str) -> None:
    body = assert_problem(await api.post("/api/v1/enqueue", json=request_body), 422)
    assert body["errors"][0]["field"] == field


async def test_enqueue_needs_write_and_an_object(api: Api) -> None:
    assert_problem(await api.post("/api/v1/enqueue", scope="read",
                                  json={"kind": "http", "payload": HOOK}), 403)
    assert_problem(await api.post("/api/v1/enqueue", json=[{"kind": "http"}]), 422)
    assert_problem(await api.post("/api/v1/enqueue/bulk", json={"kind": "http"}), 422)
    assert_problem(await api.post("/api/v1/enqueue/bulk", json=[]), 422)


async def test_enqueue_name_given_and_taken_is_a_conflict(api: Api) -> None:
    req = {"kind": "http", "payload": HOOK, "name": "receipt"}
    assert (await api.post("/api/v1/enqueue", json=req)).status_code == 201
    assert_problem(await api.post("/api/v1/enqueue", json=req), 409)


async def test_retention_shows_the_settings(api: Api, tmp_path: Path) -> None:
    r = await api.get("/api/v1/retention")
    assert r.json() == {"finished_job_retention_seconds": 604800.0,
                        "history_retention_days": 30, "audit_retention_days": 365}
    app = create_app(api.client, retention={"finished_job_retention_seconds": 60.0,
                                            "history_retention_days": 3})
    assert app.state.tickwork.retention["history_retention_days"] == 3
    assert START.year == 2030


async def test_the_dashboard_has_the_enqueue_page(api: Api) -> None:
    page = (await api.http.get("/dashboard/")).text
    assert 'src="static/enqueue.js"' in page
    assert 'href="#/enqueue"' in page
    script = await api.http.get("/dashboard/static/enqueue.js")
    assert script.status_code == 200
    assert '"/api/v1/enqueue"' in script.text
    assert '"/api/v1/retention"' in script.text
    app = (await api.http.get("/dashboard/static/app.js")).text
    assert "enqueuePage()" in app
    assert "retentionCard()" in app
