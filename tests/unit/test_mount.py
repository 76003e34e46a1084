"""The API and dashboard mounted under a prefix in a user's own FastAPI app
(docs/integration.md): the API answers under the prefix, and the dashboard's page, scripts and
API calls all resolve under it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest
from fastapi import FastAPI

from tickwork.api import create_app
from tickwork.client import AsyncClient
from tickwork.drivers import open_driver

BASE = "http://127.0.0.1:8000"


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    scheduler = AsyncClient(open_driver(f"sqlite:///{tmp_path}/app.db").store)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await scheduler.store.migrate()
        yield
        await scheduler.close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/hello")
    async def hello() -> dict[str, str]:  # the user's own route, next to the mount
        return {"hello": "world"}

    app.mount("/scheduler", create_app(scheduler, open_access=True))
    async with lifespan(app):  # httpx's transport does not run lifespans
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            yield client


async def test_the_api_answers_under_the_mount(http: httpx.AsyncClient) -> None:
    assert (await http.get("/hello")).json() == {"hello": "world"}
    doc = {"name": "mounted", "schedule": {"every": "1h"}, "kind": "http",
           "payload": {"url": "https://example.org/hook"}}
    created = await http.post("/scheduler/api/v1/jobs", json=doc)
    assert created.status_code == 201, created.text
    listed = (await http.get("/scheduler/api/v1/jobs")).json()
    assert [j["name"] for j in listed["items"]] == ["mounted"]
    assert (await http.get("/scheduler/healthz")).json()["status"] == "ok"
    assert (await http.get("/api/v1/jobs")).status_code == 404  # nothing outside the mount
    assert (await http.get("/scheduler/api/v1/jobs")).headers["cache-control"] == "no-store"


async def test_the_dashboard_and_its_files_resolve_under_the_mount(
    http: httpx.AsyncClient,
) -> None:
    for entry in ("/scheduler/", "/scheduler/dashboard"):
        moved = await http.get(entry)
        assert moved.status_code == 307
        assert moved.headers["location"] == "/scheduler/dashboard/"
    page = await http.get("/scheduler/dashboard/")
    assert page.status_code == 200
    assert "Content-Security-Policy" in page.headers  # the dashboard's headers, under a prefix
    assets = re.findall(r'(?:src|href)="([^"#]+)"', page.text)
    assert assets, "the page loads its scripts and styles"
    for asset in assets:
        assert not asset.startswith("/"), f"{asset} would miss the mount"
        url = urljoin(f"{BASE}/scheduler/dashboard/", asset)
        assert url.startswith(f"{BASE}/scheduler/dashboard/static/")
        assert (await http.get(url)).status_code == 200, url


def test_the_scripts_call_the_api_relative_to_the_mount() -> None:
    """Every fetch goes through api(), which prefixes the mount's root: new URL("..", page)."""
    static = resources.files("tickwork.dashboard") / "static"
    for name in ("app.js", "runs.js"):
        text = (static / name).read_text(encoding="utf-8")
        assert text.count("fetch(") == (1 if name == "app.js" else 0), name
    app_js = (static / "app.js").read_text(encoding="utf-8")
    assert 'const ROOT = new URL("..", location.href).pathname;' in app_js
    assert 'fetch(ROOT + path.replace(/^\\//, ""),' in app_js
    # what the browser computes, page by page
    assert urljoin(f"{BASE}/scheduler/dashboard/", "..") == f"{BASE}/scheduler/"
    assert urljoin(f"{BASE}/dashboard/", "..") == f"{BASE}/"
