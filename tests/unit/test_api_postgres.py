"""The REST API and secrets on the postgres deployment: the app over a PostgreSQL store.

A smoke test, not a second copy of test_api.py: enough to show each resource answers from
PostgreSQL (jobs, queues, stats, status, tokens, health, metrics) and that a job's
``{"$secret": ...}`` reference resolves from PostgreSQL's secret store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from cryptography.fernet import Fernet
from test_api import DOC, Api, assert_problem

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.drivers import open_driver
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.executors import ExecutorSettings, build_executors
from tickwork.metrics import Metrics
from tickwork.outcomes import Success
from tickwork.secrets import SecretKeyring, SecretResolver
from tickwork.testing.factories import claim
from tickwork.testing.harness import START
from tickwork.testing.jobs import make_context

SECRET = "pg-s3cr3t/value+1"


@pytest.fixture
async def api(postgres_url: str) -> AsyncIterator[Api]:
    client = await AsyncClient.open(postgres_url, clock=FakeClock(START))
    assert isinstance(client.store, PostgresStore)
    assert isinstance(client.clock, FakeClock)
    tokens = {scope: (await create_token(client, f"t-{scope}", scope))[0]
              for scope in ("read", "write", "admin")}
    app = create_app(client, metrics=Metrics())
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://127.0.0.1:8000")
    yield Api(http=http, client=client, clock=client.clock, tokens=tokens)
    await http.aclose()
    await client.close()


async def test_jobs_crud(api: Api) -> None:
    r = await api.post("/api/v1/jobs", json=DOC)
    assert r.status_code == 201, r.text
    assert r.json()["next_run_at"] == "2030-01-01T02:00:00Z"
    assert_problem(await api.post("/api/v1/jobs", json=DOC), 409)
    r = await api.patch("/api/v1/jobs/nightly", json={"priority": 5})
    assert (r.status_code, r.json()["priority"]) == (200, 5)
    assert [j["name"] for j in (await api.get("/api/v1/jobs")).json()["items"]] == ["nightly"]
    assert (await api.post("/api/v1/jobs/nightly/pause")).json()["paused"] is True
    assert (await api.delete("/api/v1/jobs/nightly")).status_code == 204
    assert_problem(await api.get("/api/v1/jobs/nightly"), 404)


async def test_queue_pause_stops_claims_until_resumed(api: Api) -> None:
    await api.post("/api/v1/jobs", json={**DOC, "queue": "reports"})
    assert (await api.post("/api/v1/jobs/nightly/trigger")).status_code == 201
    queues = (await api.get("/api/v1/queues")).json()["items"]
    assert queues == [{"name": "reports", "paused": False, "waiting": 1, "due": 1,
                       "running": 0, "max_running": None, "rate": None, "burst": None,
                       "tokens": None, "namespace": None}]
    assert_problem(await api.post("/api/v1/queues/reports/pause", scope="write"), 403)
    paused = await api.post("/api/v1/queues/reports/pause", scope="admin")
    assert paused.json()["paused"] is True
    store = api.client.store
    assert (await claim(store, START, queue="reports")).claims == []
    resumed = await api.post("/api/v1/queues/reports/resume", scope="admin")
    assert resumed.json()["paused"] is False
    assert len((await claim(store, START, queue="reports")).claims) == 1


async def test_stats_status_health_and_metrics(api: Api) -> None:
    await api.post("/api/v1/jobs", json=DOC)
    await api.post("/api/v1/jobs/nightly/trigger")
    stats = (await api.get("/api/v1/stats")).json()
    assert (stats["jobs"], stats["occurrences_by_state"]) == (1, {"scheduled": 1})
    assert len(stats["per_minute"]) == 60
    status = (await api.get("/api/v1/jobs/nightly/status")).json()
    assert (status["waiting"], status["success_rate"]) == (1, None)
    assert (await api.http.get("/healthz")).json()["status"] == "ok"
    metrics = await api.get("/metrics")
    assert 'tickwork_occurrences{state="scheduled"} 1' in metrics.text


async def test_tokens_authenticate_and_revoke(api: Api) -> None:
    assert_problem(await api.http.get("/api/v1/jobs"), 401)
    r = await api.post("/api/v1/tokens", scope="admin", json={"name": "ci", "scope": "read"})
    assert r.status_code == 201, r.text
    headers = {"Authorization": f"Bearer {r.json()['token']}"}
    assert (await api.http.get("/api/v1/jobs", headers=headers)).status_code == 200
    assert_problem(await api.http.post("/api/v1/jobs", headers=headers, json=DOC), 403)
    assert_problem(await api.post("/api/v1/tokens", scope="admin",
                                  json={"name": "ci", "scope": "write"}), 409)
    listed = (await api.get("/api/v1/tokens", scope="admin")).json()["items"]
    assert sorted(t["name"] for t in listed) == ["ci", "t-admin", "t-read", "t-write"]
    assert (await api.delete("/api/v1/tokens/ci", scope="admin")).status_code == 204
    assert_problem(await api.http.get("/api/v1/jobs", headers=headers), 401)
    assert_problem(await api.delete("/api/v1/tokens/ci", scope="admin"), 404)


async def test_a_job_secret_resolves_from_postgres(api: Api, postgres_url: str) -> None:
    keyring = SecretKeyring([Fernet.generate_key().decode()])
    secrets = open_driver(postgres_url).secret_store()
    try:
        await secrets.secret_set("tok", keyring.encrypt(SECRET), START)
        doc = {"name": "greeter", "schedule": {"every": "1h"}, "kind": "python",
               "payload": {"callable": "tickwork.testing.jobs:greet",
                           "args": [{"$secret": "tok"}]}}
        r = await api.post("/api/v1/jobs", json=doc)
        assert r.status_code == 201, r.text
        assert r.json()["payload"]["args"] == [{"$secret": "tok"}]  # the reference is kept
        job = await api.client.store.job_get("greeter")
        resolver = SecretResolver(secrets, keyring)
        resolved = await resolver.resolve(job.spec.payload, namespace=job.namespace)
        assert resolved["args"] == [SECRET]
        executors = build_executors(ExecutorSettings(
            python_allowed_modules=("tickwork.testing",)), resolver)
        outcome = await executors["python"].execute(make_context("python", job.spec.payload))
        assert isinstance(outcome, Success)
        assert outcome.output is not None
        assert SECRET not in outcome.output
        assert outcome.output == "hello ****!"
    finally:
        await secrets.close()
