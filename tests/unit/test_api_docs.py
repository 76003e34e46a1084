"""/docs and /redoc work offline: every file they load comes from the app itself."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tickwork.api.app import DASHBOARD_CSP, create_app
from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.drivers.sqlite.store import SqliteStore

TYPES = {".js": ("text/javascript", "application/javascript"), ".css": ("text/css",),
         ".png": ("image/png",)}


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = SqliteStore(f"sqlite:///{tmp_path}/api.db")
    await store.migrate()
    app = create_app(AsyncClient(store, clock=FakeClock()))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1:8000") as client:
        yield client
    await store.close()


def referenced(html: str) -> list[str]:
    """The URLs a page loads: src= and href= attributes, and the spec URL of either UI."""
    urls = re.findall(r"""(?:src|href|spec-url)\s*=\s*["']([^"']+)["']""", html)
    urls += re.findall(r"""\burl\s*:\s*['"]([^'"]+)['"]""", html)  # SwaggerUIBundle({url: ...})
    return urls


@pytest.mark.parametrize(("page", "assets"), [
    ("/docs", {"/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css",
               "/docs/assets/favicon.png"}),
    ("/redoc", {"/docs/assets/redoc.standalone.js", "/docs/assets/favicon.png"}),
])
async def test_the_api_docs_load_only_local_files(http: httpx.AsyncClient, page: str,
                                                  assets: set[str]) -> None:
    r = await http.get(page)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "http://" not in r.text
    assert "https://" not in r.text  # no CDN, no web fonts
    urls = referenced(r.text)
    assert assets <= set(urls), urls
    assert "/openapi.json" in urls
    for url in urls:
        assert url.startswith("/"), url
        assert not url.startswith("//"), url
        got = await http.get(url)
        assert got.status_code == 200, url
        suffix = Path(url).suffix
        if suffix in TYPES:
            assert got.headers["content-type"].split(";")[0] in TYPES[suffix], (url, got.headers)
            assert len(got.content) > 1000, url
        else:
            assert got.headers["content-type"].startswith("application/json"), url


async def test_the_swagger_ui_bundle_is_the_real_one(http: httpx.AsyncClient) -> None:
    js = (await http.get("/docs/assets/swagger-ui-bundle.js")).text
    assert "SwaggerUIBundle" in js
    assert "Redoc" in (await http.get("/docs/assets/redoc.standalone.js")).text
    redirect = await http.get("/docs/oauth2-redirect")
    assert redirect.status_code == 200


async def test_the_dashboard_policy_stays_on_the_dashboard(http: httpx.AsyncClient) -> None:
    """The API docs need an inline script, which the dashboard's policy forbids; they are not
    under it, and the dashboard still is."""
    assert "content-security-policy" not in (await http.get("/docs")).headers
    dashboard = await http.get("/dashboard/")
    assert dashboard.headers["content-security-policy"] == DASHBOARD_CSP


async def test_under_a_mount_the_pages_name_the_prefix(tmp_path: Path) -> None:
    """Mounted in another app (docs/integration.md), the pages load their files and the
    OpenAPI document from under the mount."""
    from fastapi import FastAPI

    store = SqliteStore(f"sqlite:///{tmp_path}/api.db")
    await store.migrate()
    outer = FastAPI()
    outer.mount("/scheduler", create_app(AsyncClient(store, clock=FakeClock())))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=outer),
                                     base_url="http://127.0.0.1:8000") as http:
            for page in ("/scheduler/docs", "/scheduler/redoc"):
                r = await http.get(page)
                assert r.status_code == 200, page
                urls = referenced(r.text)
                assert "/scheduler/openapi.json" in urls
                for url in urls:
                    assert url.startswith("/scheduler/"), url
                    assert (await http.get(url)).status_code == 200, url
    finally:
        await store.close()
