"""The aggregate counts follow the caller's namespace, on SQLite and PostgreSQL: a token of one
namespace gets its own jobs' figures from /api/v1/stats, /api/v1/queues and /metrics (and the
CLI's ``queues list --api``); a token that sees every namespace gets the whole store's, and
narrows them with ``?namespace=``."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_cli_api import ApiThread

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.cli.main import main
from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.metrics import Metrics
from tickwork.testing.factories import claim
from tickwork.testing.harness import START


@dataclass
class Tenants:
    client: AsyncClient
    http: httpx.AsyncClient
    tokens: dict[str, str]

    async def get(self, who: str, url: str) -> Any:
        r = await self.http.get(url, headers={"Authorization": f"Bearer {self.tokens[who]}"})
        assert r.status_code == 200, r.text
        return r.json() if r.headers["content-type"].startswith("application/json") else r.text

    async def post(self, who: str, url: str, **kw: Any) -> Any:
        r = await self.http.post(url, headers={"Authorization": f"Bearer {self.tokens[who]}"},
                                 **kw)
        assert r.status_code == 201, r.text
        return r.json()


@pytest.fixture(params=["sqlite", "postgres"])
async def t(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Tenants]:
    url = (f"sqlite:///{tmp_path}/tickwork.db" if request.param == "sqlite"
           else request.getfixturevalue("postgres_url"))
    client = await AsyncClient.open(url, clock=FakeClock(START))
    tokens = {}
    for who, namespace in (("a", "a"), ("b", "b"), ("root", None)):
        tokens[who] = (await create_token(client, who, "write", namespace))[0]
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(
        client, metrics=Metrics())), base_url="http://127.0.0.1:8000")
    yield Tenants(client=client, http=http, tokens=tokens)
    await http.aclose()
    await client.close()


def job(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "http", "schedule": {"every": "1d"},
            "payload": {"url": "https://example.org/hook"}, **extra}


def queues(listing: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    return {q["name"]: (q["waiting"], q["due"], q["running"]) for q in listing["items"]}


async def test_counts_follow_the_tokens_namespace(t: Tenants) -> None:
    # b: one run running in reports; a: two jobs (one paused), two runs waiting in default.
    await t.post("b", "/api/v1/jobs", json=job("one", queue="reports"))
    await t.post("b", "/api/v1/jobs/one/trigger")
    assert len((await claim(t.client.store, START, queue="reports")).claims) == 1
    await t.post("a", "/api/v1/jobs", json=job("one"))
    await t.post("a", "/api/v1/jobs", json=job("two", paused=True))
    await t.post("a", "/api/v1/jobs/one/trigger")
    clock = t.client.clock
    assert isinstance(clock, FakeClock)
    clock.advance(60)
    await t.post("a", "/api/v1/jobs/one/trigger")

    a = await t.get("a", "/api/v1/stats")
    assert (a["jobs"], a["jobs_paused"], a["occurrences_by_state"]) == (
        2, 1, {"scheduled": 2})
    b = await t.get("b", "/api/v1/stats")
    assert (b["jobs"], b["jobs_paused"], b["occurrences_by_state"]) == (1, 0, {"running": 1})
    every = await t.get("root", "/api/v1/stats")
    assert (every["jobs"], every["occurrences_by_state"]) == (
        3, {"scheduled": 2, "running": 1})
    narrowed = await t.get("root", "/api/v1/stats?namespace=b")
    assert (narrowed["jobs"], narrowed["occurrences_by_state"]) == (1, {"running": 1})
    # A namespace parameter naming another namespace is ignored for a token of one.
    assert (await t.get("a", "/api/v1/stats?namespace=b"))["jobs"] == 2

    # Queues are shared: each is listed, with the caller's own counts.
    assert queues(await t.get("a", "/api/v1/queues")) == {
        "default": (2, 2, 0), "reports": (0, 0, 0)}
    assert queues(await t.get("b", "/api/v1/queues")) == {
        "default": (0, 0, 0), "reports": (0, 0, 1)}
    assert queues(await t.get("root", "/api/v1/queues")) == {
        "default": (2, 2, 0), "reports": (0, 0, 1)}
    assert queues(await t.get("root", "/api/v1/queues?namespace=a")) == {
        "default": (2, 2, 0), "reports": (0, 0, 0)}

    # /metrics answers any read token with what that token sees.
    def gauge(text: str, name: str, label: str) -> float:
        found = re.search(rf'^{name}\{{{label}\}} (\S+)$', text, re.MULTILINE)
        assert found is not None, text
        return float(found.group(1))

    for who, scheduled, running in (("a", 2, 0), ("b", 0, 1), ("root", 2, 1)):
        text = await t.get(who, "/metrics")
        assert gauge(text, "tickwork_occurrences", 'state="scheduled"') == scheduled
        assert gauge(text, "tickwork_queue_running", 'queue="reports"') == running


def test_the_cli_lists_the_queue_counts_of_its_namespace(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("TICKWORK_")]:
        monkeypatch.delenv(key)
    url = f"sqlite:///{tmp_path}/cli.db"

    async def setup() -> dict[str, str]:
        client = await AsyncClient.open(url)
        try:
            for namespace, runs in (("a", 1), ("b", 2)):
                scoped = client.scoped(namespace)
                await scoped.create_job(job("one"))
                for _ in range(runs):
                    await scoped.trigger_job("one")
            return {who: (await create_token(client, who, "read", namespace))[0]
                    for who, namespace in (("a", "a"), ("b", "b"), ("root", None))}
        finally:
            await client.close()

    tokens = asyncio.run(setup())

    def waiting(*args: str) -> int:
        assert main(["queues", "list", "--json", *args]) == 0
        (default,) = json.loads(capsys.readouterr().out)
        return int(default["waiting"])

    with ApiThread(url) as server:
        assert waiting("--api", server.url, "--token", tokens["a"]) == 1
        assert waiting("--api", server.url, "--token", tokens["b"]) == 2
        assert waiting("--api", server.url, "--token", tokens["root"]) == 3
        assert waiting("--api", server.url, "--token", tokens["root"], "--namespace", "b") == 2
    assert waiting("--database", url, "--namespace", "a") == 1
    assert waiting("--database", url) == 3
