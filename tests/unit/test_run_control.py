"""Run control (cancel, retry), the audit trail and a deleted job's history: through the
worker pool on a FakeClock, the Python client and the REST API, over a real SQLite file."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import Conflict
from tickwork.metrics import Metrics
from tickwork.models import AuditAction, OccurrenceState, rfc3339
from tickwork.testing.harness import START, Harness
from tickwork.testing.jobs import EVENTS

S = OccurrenceState
DOC = {"name": "hook", "schedule": {"at": rfc3339(START)}, "kind": "http",
       "payload": {"url": "https://example.org/hook"}, "retry": {"max_attempts": 1}}


async def test_cancelling_a_running_async_job_stops_it_at_once(harness: Harness) -> None:
    name = "cancel-me"
    EVENTS[f"{name}:started"] = threading.Event()
    EVENTS[name] = threading.Event()
    harness.client.on_cancel = harness.pool.heartbeat_soon
    await harness.client.create_job({
        "name": "hangs", "schedule": {"at": rfc3339(START)}, "kind": "python",
        "payload": {"callable": "tickwork.testing.jobs:wait_forever", "args": [name]},
        "timeout_seconds": 300})
    await harness.tick()
    assert await asyncio.to_thread(EVENTS[f"{name}:started"].wait, 10)
    run = await harness.client.cancel_run("hangs", START, actor="alice")
    assert (run.state, run.last_error) == (S.CANCELLED, "cancelled by alice")
    # no clock movement: the heartbeat ran at once and cancelled the coroutine
    assert await asyncio.to_thread(EVENTS[name].wait, 10)
    _, attempts = await harness.client.get_run("hangs", START)
    assert [(a.number, a.error) for a in attempts] == [(1, "cancelled by alice")]
    assert harness.pool.running_count == 0


async def test_a_cancelled_sync_job_is_noted_as_running_on_in_its_thread(
        harness: Harness) -> None:
    name = "cancel-sync"
    EVENTS[f"{name}:started"] = threading.Event()
    EVENTS[name] = threading.Event()
    await harness.client.create_job({
        "name": "blocks", "schedule": {"at": rfc3339(START)}, "kind": "python",
        "payload": {"callable": "tickwork.testing.jobs:block_until", "args": [name]},
        "timeout_seconds": 300})
    await harness.tick()
    assert await asyncio.to_thread(EVENTS[f"{name}:started"].wait, 10)
    [task] = [r.task for q in harness.pool.queues.values() for r in q.running.values()]
    await harness.client.cancel_run("blocks", START, actor="bob")
    await harness.pool.heartbeat_once(harness.clock.now())  # the worker learns it here
    await asyncio.gather(task, return_exceptions=True)  # and has noted it when this ends
    EVENTS[name].set()  # the thread ran on until now
    run, attempts = await harness.client.get_run("blocks", START)
    assert attempts[0].error is not None
    assert attempts[0].error.startswith("cancelled by bob; its synchronous callable runs in a "
                                        "thread, which cannot be stopped")
    assert run.state is S.CANCELLED
    assert run.last_error == attempts[0].error
    assert harness.pool.running_count == 0


async def test_a_dead_run_retried_runs_as_its_next_attempt(harness: Harness) -> None:
    job = await harness.client.create_job({**DOC, "payload": {"url": "http://127.0.0.1:9/"}})
    await harness.tick()
    done = await harness.completed()
    assert done.state is S.DEAD
    run = await harness.client.retry_run(job.id, START, actor="bob")
    assert (run.state, run.attempt) == (S.RETRYING, 1)
    harness.pool.wake()
    again = await harness.completed()
    assert (again.attempt, again.state) == (2, S.DEAD)
    with pytest.raises(Conflict):
        await harness.client.cancel_run(job.id, START)


# -- the API ---------------------------------------------------------------------------------


class Api:
    def __init__(self, http: httpx.AsyncClient, client: AsyncClient, token: str) -> None:
        self.http, self.client = http, client
        self.headers = {"Authorization": f"Bearer {token}"}

    async def call(self, method: str, url: str, **kw: Any) -> httpx.Response:
        return await self.http.request(method, url, headers=self.headers, **kw)


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    store = SqliteStore(f"sqlite:///{tmp_path}/api.db")
    await store.migrate()
    client = AsyncClient(store, clock=FakeClock(START), actor="os-user")
    token, _ = await create_token(client, "ci-bot", "write")
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(
        client, metrics=Metrics())), base_url="http://127.0.0.1:8000")
    yield Api(http, client, token)
    await http.aclose()
    await client.close()


async def test_api_cancel_and_retry_name_the_token(api: Api) -> None:
    r = await api.call("POST", "/api/v1/jobs", json=DOC)
    assert r.status_code == 201
    assert (r.json()["created_by"], r.json()["updated_by"]) == ("ci-bot", "ci-bot")
    run = (await api.call("POST", "/api/v1/jobs/hook/trigger")).json()
    url = f"/api/v1/jobs/hook/runs/{run['scheduled_at']}"
    r = await api.call("POST", f"{url}/cancel")
    assert r.status_code == 200
    assert (r.json()["state"], r.json()["last_error"]) == ("cancelled", "cancelled by ci-bot")
    assert (await api.call("POST", f"{url}/cancel")).status_code == 409
    r = await api.call("POST", f"{url}/retry")
    assert (r.status_code, r.json()["state"]) == (200, "retrying")
    assert r.json()["idempotency_key"] == run["idempotency_key"]
    assert (await api.call("POST", f"{url}/retry")).status_code == 409
    assert (await api.call("POST", "/api/v1/jobs/hook/runs/2030-01-01T09:00:00Z/cancel")
            ).status_code == 404


async def test_api_audit_trail(api: Api) -> None:
    await api.call("POST", "/api/v1/jobs", json=DOC)
    await api.call("PATCH", "/api/v1/jobs/hook", json={"priority": 3})
    await api.call("POST", "/api/v1/jobs/hook/pause")
    await api.call("POST", "/api/v1/jobs/hook/resume")
    await api.call("POST", "/api/v1/jobs/hook/trigger")
    job = (await api.call("GET", "/api/v1/jobs/hook")).json()
    assert job["updated_by"] == "ci-bot"
    await api.client.pause_job("hook")  # the Python client: the OS user (here, given)
    await api.call("DELETE", "/api/v1/jobs/hook")
    r = await api.call("GET", f"/api/v1/jobs/{job['id']}/audit")
    assert r.status_code == 200
    items = r.json()["items"]
    assert [(e["action"], e["actor"]) for e in items] == [
        ("create", "ci-bot"), ("update", "ci-bot"), ("pause", "ci-bot"), ("resume", "ci-bot"),
        ("trigger", "ci-bot"), ("pause", "os-user"), ("delete", "ci-bot")]
    assert items[1]["details"] == {"priority": {"before": 0, "after": 3}}
    assert (await api.call("GET", "/api/v1/jobs/hook/audit")).json()["items"] == items
    page = (await api.call("GET", "/api/v1/audit", params={"limit": 4})).json()
    assert [e["id"] for e in page["items"]] == [e["id"] for e in items[:4]]
    rest = (await api.call("GET", "/api/v1/audit", params={"cursor": page["next_cursor"]})
            ).json()
    assert [e["id"] for e in rest["items"]] == [e["id"] for e in items[4:]]
    since = (await api.call("GET", "/api/v1/audit",
                            params={"since": "2031-01-01T00:00:00Z"})).json()
    assert since["items"] == []
    assert [e.action for e in await api.client.audit(job="hook")][-1] is AuditAction.DELETE


async def test_a_deleted_jobs_runs_by_name_and_id(api: Api) -> None:
    job = (await api.call("POST", "/api/v1/jobs", json=DOC)).json()
    run = (await api.call("POST", "/api/v1/jobs/hook/trigger")).json()
    assert (await api.call("DELETE", "/api/v1/jobs/hook")).status_code == 204
    for ref in ("hook", job["id"]):
        r = await api.call("GET", "/api/v1/runs", params={"job": ref})
        assert r.status_code == 200
        items = r.json()["items"]
        assert [(i["scheduled_at"], i["job_name"], i["state"]) for i in items] == [
            (run["scheduled_at"], "hook", "cancelled")]
    r = await api.call("GET", f"/api/v1/jobs/hook/runs/{run['scheduled_at']}")
    assert (r.status_code, r.json()["run"]["job_name"]) == (200, "hook")
    assert (await api.call("GET", "/api/v1/runs", params={"job": "never"})).status_code == 404
    # a new job under the old name: its runs, not the deleted one's
    await api.call("POST", "/api/v1/jobs", json=DOC)
    assert (await api.call("GET", "/api/v1/runs", params={"job": "hook"})).json()["items"] == []
