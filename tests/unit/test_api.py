"""The REST API over a real SQLite file: jobs, runs, queues, stats, problem details."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.api.errors import problem_for
from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.drivers.admin import TokenNotFound
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import JobNotFound
from tickwork.metrics import Metrics
from tickwork.testing.harness import START

DOC = {"name": "nightly", "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Berlin"},
       "kind": "http", "payload": {"url": "https://example.org/hook"}, "tags": ["reports"]}


@dataclass
class Api:
    http: httpx.AsyncClient
    client: AsyncClient
    clock: FakeClock
    tokens: dict[str, str]

    def auth(self, scope: str = "admin") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[scope]}"}

    async def get(self, url: str, scope: str = "read", **kw: Any) -> httpx.Response:
        return await self.http.get(url, headers=self.auth(scope), **kw)

    async def post(self, url: str, scope: str = "write", **kw: Any) -> httpx.Response:
        return await self.http.post(url, headers=self.auth(scope), **kw)

    async def patch(self, url: str, scope: str = "write", **kw: Any) -> httpx.Response:
        return await self.http.patch(url, headers=self.auth(scope), **kw)

    async def delete(self, url: str, scope: str = "write") -> httpx.Response:
        return await self.http.delete(url, headers=self.auth(scope))


async def open_api(tmp_path: Path, *, open_access: bool = False,
                   max_body_bytes: int = 4 * 1024 * 1024) -> tuple[Api, SqliteStore]:
    store = SqliteStore(f"sqlite:///{tmp_path}/api.db")
    await store.migrate()
    clock = FakeClock(START)
    client = AsyncClient(store, clock=clock)
    tokens = {scope: (await create_token(client, f"t-{scope}", scope))[0]
              for scope in ("read", "write", "admin")}
    app = create_app(client, open_access=open_access, metrics=Metrics(),
                     max_body_bytes=max_body_bytes)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://127.0.0.1:8000")
    return Api(http=http, client=client, clock=clock, tokens=tokens), store


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    a, store = await open_api(tmp_path)
    yield a
    await a.http.aclose()
    await store.close()


def assert_problem(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = r.json()
    assert {"type", "title", "status", "detail"} <= body.keys()
    assert body["status"] == status
    return body


# --- jobs ------------------------------------------------------------------------------------

async def test_create_read_update_delete(api: Api) -> None:
    r = await api.post("/api/v1/jobs", json=DOC)
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["name"] == "nightly"
    assert job["schedule"]["timezone"] == "Europe/Berlin"
    assert job["next_run_at"] == "2030-01-01T02:00:00Z"

    assert (await api.get(f"/api/v1/jobs/{job['id']}")).json()["name"] == "nightly"
    r = await api.patch("/api/v1/jobs/nightly", json={"priority": 5, "tags": ["a", "b"]})
    assert r.status_code == 200, r.text
    assert (r.json()["priority"], r.json()["tags"]) == (5, ["a", "b"])
    assert r.json()["schedule"] == job["schedule"]  # untouched fields keep their values

    assert (await api.delete("/api/v1/jobs/nightly")).status_code == 204
    gone = assert_problem(await api.get("/api/v1/jobs/nightly"), 404)
    assert gone["detail"] == "no job 'nightly'"  # whole, closing quote included


async def test_bulk_create_is_all_or_nothing(api: Api) -> None:
    docs = [{**DOC, "name": f"job-{i}"} for i in range(3)]
    r = await api.post("/api/v1/jobs", json=docs)
    assert r.status_code == 201
    assert len(r.json()["items"]) == 3
    bad = [{**DOC, "name": "ok-1"}, {**DOC, "name": "bad", "schedule": {"cron": "61 * * * *"}}]
    body = assert_problem(await api.post("/api/v1/jobs", json=bad), 422)
    assert body["errors"][0]["field"] == "[1].schedule.cron"
    assert len((await api.get("/api/v1/jobs")).json()["items"]) == 3


async def test_validation_errors_name_the_field(api: Api) -> None:
    body = assert_problem(await api.post("/api/v1/jobs", json={**DOC, "schedule": {
        "cron": "61 * * * *"}}), 422)
    assert body["errors"] == [{"field": "schedule.cron",
                               "message": "field 'minute' value 61 is out of range 0-59"}]
    body = assert_problem(await api.post("/api/v1/jobs", json={**DOC, "queu": "x"}), 422)
    assert "did you mean 'queue'" in body["errors"][0]["message"]


async def test_duplicate_name_is_a_conflict(api: Api) -> None:
    assert (await api.post("/api/v1/jobs", json=DOC)).status_code == 201
    assert_problem(await api.post("/api/v1/jobs", json=DOC), 409)


async def test_list_filters_and_cursor_pages(api: Api) -> None:
    docs = [{**DOC, "name": f"job-{i:02d}", "tags": ["even" if i % 2 == 0 else "odd"],
             "paused": i == 3} for i in range(7)]
    await api.post("/api/v1/jobs", json=docs)
    names: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = (await api.get("/api/v1/jobs", params=params)).json()
        names += [j["name"] for j in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert names == [f"job-{i:02d}" for i in range(7)]
    odd = (await api.get("/api/v1/jobs", params={"tag": "odd"})).json()["items"]
    assert [j["name"] for j in odd] == ["job-01", "job-03", "job-05"]
    paused = (await api.get("/api/v1/jobs", params={"paused": "true"})).json()["items"]
    assert [j["name"] for j in paused] == ["job-03"]
    found = (await api.get("/api/v1/jobs", params={"name": "JOB-0"})).json()["items"]
    assert len(found) == 7
    assert_problem(await api.get("/api/v1/jobs", params={"cursor": "nonsense"}), 422)


async def test_pause_resume_trigger(api: Api) -> None:
    await api.post("/api/v1/jobs", json=DOC)
    assert (await api.post("/api/v1/jobs/nightly/pause")).json()["paused"] is True
    assert (await api.post("/api/v1/jobs/nightly/resume")).json()["paused"] is False
    r = await api.post("/api/v1/jobs/nightly/trigger")
    assert r.status_code == 201
    assert (r.json()["trigger"], r.json()["state"], r.json()["job_name"]) == (
        "manual", "scheduled", "nightly")


async def test_preview_of_a_job_and_of_a_draft(api: Api) -> None:
    await api.post("/api/v1/jobs", json=DOC)
    r = await api.get("/api/v1/jobs/nightly/preview", params={"count": 2})
    assert r.json()["times"] == ["2030-01-01T02:00:00Z", "2030-01-02T02:00:00Z"]
    assert r.json()["timezone"] == "Europe/Berlin"
    assert r.json()["description"]
    r = await api.post("/api/v1/preview", json={"schedule": {"every": "15m"}, "count": 3})
    assert r.status_code == 200, r.text
    assert r.json()["times"] == ["2030-01-01T00:15:00Z", "2030-01-01T00:30:00Z",
                                 "2030-01-01T00:45:00Z"]
    body = assert_problem(await api.post("/api/v1/preview", json={"schedule": {"cron": "x"}}),
                          422)
    assert body["errors"][0]["field"] == "schedule.cron"


async def test_preview_shows_the_cron_day_forms_and_years(api: Api) -> None:
    """The dashboard's new-job form previews as you type: each cron form, in words and times."""
    cases = [
        ({"cron": "0 9 L * *"}, "at 09:00 on the last day of the month",
         ["2030-01-31T09:00:00Z", "2030-02-28T09:00:00Z"]),
        ({"cron": "0 9 15W * *"}, "at 09:00 on the weekday nearest the 15th of the month",
         ["2030-01-15T09:00:00Z", "2030-02-15T09:00:00Z"]),
        ({"cron": "0 9 ? * FRI#2", "timezone": "Europe/Berlin"},
         "at 09:00 on the second Friday of the month (Europe/Berlin)",
         ["2030-01-11T08:00:00Z", "2030-02-08T08:00:00Z"]),
        ({"cron": "0 9 ? * MONL"}, "at 09:00 on the last Monday of the month",
         ["2030-01-28T09:00:00Z", "2030-02-25T09:00:00Z"]),
        ({"cron": "0 0 9 LW * ? 2031"}, "at 09:00 on the last weekday of the month in 2031",
         ["2031-01-31T09:00:00Z", "2031-02-28T09:00:00Z"]),
        ({"cron": "@monthly"}, "at 00:00 on day 1 of the month",
         ["2030-02-01T00:00:00Z", "2030-03-01T00:00:00Z"]),
    ]
    for schedule, description, times in cases:
        r = await api.post("/api/v1/preview", json={"schedule": schedule, "count": 2})
        assert r.status_code == 200, r.text
        assert (r.json()["description"], r.json()["times"]) == (description, times)
    for cron, reason in [
            ("0 0 0 ? 2 5#5 2031", "never fires: no day in February of 2031 is the fifth Friday"),
            ("0 0 31W 4 *", "never fires: no day in April is the weekday nearest the 31st"),
            ("0 0 * * 5#6", "field 'day-of-week' value '5#6': the week after '#' must be")]:
        body = assert_problem(await api.post("/api/v1/preview", json={"schedule": {"cron": cron}}),
                              422)
        assert body["errors"][0]["field"] == "schedule.cron"
        assert body["errors"][0]["message"].startswith(reason), body


async def test_a_cron_whose_years_are_past_is_refused_on_save(api: Api) -> None:
    r = await api.post("/api/v1/jobs", json={**DOC, "schedule": {"cron": "0 0 3 * * * 2029"}})
    body = assert_problem(r, 422)
    assert body["errors"][0] == {"field": "schedule.cron", "message": (
        "has no fire time from now on: the years its year field selects are past, so the job "
        "would never run")}
    r = await api.post("/api/v1/jobs", json={**DOC, "schedule": {"cron": "0 0 3 L 2 ? 2030"}})
    assert r.status_code == 201, r.text
    assert r.json()["next_run_at"] == "2030-02-28T03:00:00Z"


async def test_backfill_is_bounded_and_idempotent(api: Api) -> None:
    await api.post("/api/v1/jobs", json={**DOC, "name": "hourly",
                                          "schedule": {"cron": "0 * * * *"}})
    api.clock.advance(timedelta(days=1).total_seconds())
    span = {"from": "2030-01-01T00:00:00Z", "to": "2030-01-01T05:00:00Z"}
    r = await api.post("/api/v1/jobs/hourly/backfill", json=span)
    assert r.status_code == 200, r.text
    assert r.json()["created"] == 5
    assert {run["trigger"] for run in r.json()["items"]} == {"backfill"}
    again = await api.post("/api/v1/jobs/hourly/backfill", json=span)
    assert again.json()["created"] == 0
    assert len(again.json()["items"]) == 5
    too_many = {"from": "2030-01-01T00:00:00Z", "to": "2030-01-02T00:00:00Z", "limit": 10}
    assert_problem(await api.post("/api/v1/jobs/hourly/backfill", json=too_many), 422)
    future = {"from": "2030-01-01T00:00:00Z", "to": "2031-01-01T00:00:00Z"}
    assert_problem(await api.post("/api/v1/jobs/hourly/backfill", json=future), 422)
    runs = (await api.get("/api/v1/runs", params={"job": "hourly"})).json()["items"]
    assert len(runs) == 5


# --- runs, status, queues, stats --------------------------------------------------------------

async def test_runs_pages_and_run_detail(api: Api) -> None:
    await api.post("/api/v1/jobs", json=DOC)
    for _ in range(5):
        await api.post("/api/v1/jobs/nightly/trigger")
        api.clock.advance(1)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, "job": "nightly"}
        if cursor:
            params["cursor"] = cursor
        page = (await api.get("/api/v1/runs", params=params)).json()
        seen += [r["scheduled_at"] for r in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == 5
    assert seen == sorted(seen, reverse=True)
    detail = (await api.get(f"/api/v1/jobs/nightly/runs/{seen[0]}")).json()
    assert detail["run"]["scheduled_at"] == seen[0]
    assert detail["attempts"] == []
    assert_problem(await api.get("/api/v1/runs", params={"state": "bogus"}), 422)
    await api.post("/api/v1/jobs", json={**DOC, "name": "mailer", "queue": "mail"})
    await api.post("/api/v1/jobs/mailer/trigger")
    mail = (await api.get("/api/v1/runs", params={"queue": "mail"})).json()["items"]
    assert [(r["job_name"], r["queue"]) for r in mail] == [("mailer", "mail")]
    both = (await api.get("/api/v1/runs", params=[("state", "scheduled"), ("state", "dead")]))
    assert len(both.json()["items"]) == 6
    assert_problem(await api.get("/api/v1/jobs/nightly/runs/2030-13-01T00:00:00Z"), 422)
    assert_problem(await api.get("/api/v1/jobs/nightly/runs/2031-01-01T00:00:00Z"), 404)


async def test_status_queues_and_stats(api: Api) -> None:
    await api.post("/api/v1/jobs", json={**DOC, "queue": "reports"})
    await api.post("/api/v1/jobs/nightly/trigger")
    status = (await api.get("/api/v1/jobs/nightly/status")).json()
    assert status["waiting"] == 1
    assert status["success_rate"] is None
    assert status["next_run_at"] == "2030-01-01T02:00:00Z"
    queues = (await api.get("/api/v1/queues")).json()["items"]
    assert queues == [{"name": "reports", "paused": False, "waiting": 1, "due": 1,
                       "running": 0, "max_running": None, "rate": None, "burst": None,
                       "tokens": None, "namespace": None}]
    assert_problem(await api.post("/api/v1/queues/reports/pause", scope="write"), 403)
    paused = await api.post("/api/v1/queues/reports/pause", scope="admin")
    assert paused.json()["paused"] is True
    stats = (await api.get("/api/v1/stats")).json()
    assert stats["jobs"] == 1
    assert stats["occurrences_by_state"] == {"scheduled": 1}
    assert len(stats["per_minute"]) == 60


async def test_healthz_and_metrics(api: Api) -> None:
    assert (await api.http.get("/healthz")).json()["status"] == "ok"
    r = await api.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain")
    assert 'tickwork_occurrences{state="succeeded"} 0' in r.text
    assert_problem(await api.http.get("/metrics"), 401)


# --- problem details for whatever goes wrong --------------------------------------------------

async def test_unknown_route_and_bad_query_are_problems(api: Api) -> None:
    assert_problem(await api.get("/api/v1/nothing"), 404)
    body = assert_problem(await api.get("/api/v1/jobs", params={"limit": "x"}), 422)
    assert body["errors"][0]["field"] == "limit"
    assert_problem(await api.http.put("/api/v1/jobs", headers=api.auth()), 405)


def test_a_not_found_detail_keeps_its_quotes() -> None:
    for exc, detail in ((JobNotFound("x"), "no job 'x'"),
                        (TokenNotFound("ci"), "no active token 'ci'"),
                        (KeyError("plain key"), "plain key")):
        assert json.loads(problem_for(exc).body)["detail"] == detail


async def test_body_must_be_json(api: Api) -> None:
    r = await api.http.post("/api/v1/jobs", content=b"name=x", headers={
        **api.auth("write"), "Content-Type": "application/x-www-form-urlencoded"})
    assert_problem(r, 415)
    r = await api.http.post("/api/v1/jobs", content=b"{not json",
                            headers={**api.auth("write"), "Content-Type": "application/json"})
    assert_problem(r, 422)
    deep = b"[" * 100_000 + b"]" * 100_000
    r = await api.http.post("/api/v1/jobs", content=deep,
                            headers={**api.auth("write"), "Content-Type": "application/json"})
    assert_problem(r, 422)
