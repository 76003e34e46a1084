"""GET /api/v1/alerts and the job document's alerts field over the API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_api import DOC, Api, assert_problem, open_api

from tickwork.drivers.alerts import AlertFireParams, AlertResolveParams, NewDelivery
from tickwork.drivers.sqlite.secrets import SqliteSecretStore
from tickwork.testing.harness import START

ALERTS = {"channels": [{"kind": "slack", "webhook_url": {"$secret": "slack-ops"}}],
          "consecutive_failures": 3, "late_after": "5m"}


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    a, store = await open_api(tmp_path)
    # A job may name only secrets its namespace has (the value is never read here).
    await SqliteSecretStore(store.path).secret_set("slack-ops", b"ciphertext", START)
    yield a
    await a.http.aclose()
    await store.close()


async def test_a_job_keeps_its_alerts(api: Api) -> None:
    r = await api.post("/api/v1/jobs", json={**DOC, "alerts": ALERTS})
    assert r.status_code == 201, r.text
    assert r.json()["alerts"] == {
        "channels": [{"kind": "slack", "webhook_url": {"$secret": "slack-ops"}}],
        "on": ["dead", "crashed", "missed"], "consecutive_failures": 3, "late_after": 300,
        "cooldown": 3600, "resolved": True}
    r = await api.patch("/api/v1/jobs/nightly", json={"alerts": None})
    assert "alerts" not in r.json()
    bad = await api.post("/api/v1/jobs", json={**DOC, "name": "x", "alerts": {
        "channels": [{"kind": "pager"}]}})
    assert assert_problem(bad, 422)["errors"][0]["field"] == "alerts.channels[0].kind"


async def test_list_alerts(api: Api) -> None:
    store = api.client.store
    for i, name in enumerate(("a", "b", "c")):
        await store.alert_fire(AlertFireParams(
            job_id=f"id-{name}", job_name=name, condition="failed", detail="run dead",
            now=START.replace(second=i), cooldown_seconds=0,
            deliveries=[NewDelivery(channel=0, kind="slack", payload='{"webhook_url": "s"}')]))
    await store.alert_resolve(AlertResolveParams(job_id="id-a", condition="failed",
                                                 detail="ok", now=START.replace(second=9)))
    r = await api.get("/api/v1/alerts", params={"limit": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [a["job_name"] for a in body["items"]] == ["c", "b"]
    first = body["items"][0]
    assert first["state"] == "firing"
    assert first["deliveries"][0]["kind"] == "slack"
    assert "payload" not in first["deliveries"][0]  # a webhook URL is a credential
    more = await api.get("/api/v1/alerts", params={"cursor": body["next_cursor"]})
    assert [a["job_name"] for a in more.json()["items"]] == ["a"]
    resolved = await api.get("/api/v1/alerts", params={"state": "resolved"})
    assert [(a["job_name"], a["resolved_at"] is not None) for a in resolved.json()["items"]] == [
        ("a", True)]
    assert_problem(await api.get("/api/v1/alerts", params={"state": "nope"}), 422)
    assert_problem(await api.get("/api/v1/alerts", params={"job": "missing"}), 404)
