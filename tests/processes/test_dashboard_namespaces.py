"""Namespaces in the dashboard, in headless Chromium: a token of one namespace sees its
namespace in the header and only its jobs; a token of every namespace filters by one and
sets a namespace's quotas on the Namespaces page."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_dashboard_browser import BROWSER_ARGS, CHROMIUM, need_chromium

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.api.server import ApiServer
from tickwork.client import AsyncClient
from tickwork.drivers.sqlite.store import SqliteStore

pytestmark = pytest.mark.browser


def doc(name: str) -> dict[str, object]:
    return {"name": name, "kind": "http", "schedule": {"every": "1h"},
            "payload": {"url": "https://example.org/"}}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, dict[str, str], AsyncClient]]:
    store = SqliteStore(f"sqlite:///{tmp_path}/ui.db")
    await store.migrate()
    client = AsyncClient(store)
    await client.scoped("acme").create_job(doc("acme-job"))
    await client.scoped("globex").create_job(doc("globex-job"))
    tokens = {"acme": (await create_token(client, "acme-ui", "write", "acme"))[0],
              "root": (await create_token(client, "root-ui", "admin"))[0]}
    server = ApiServer(create_app(client), host="127.0.0.1", port=0)
    await server.start()
    yield server.url, tokens, client
    await server.stop()
    await store.close()


async def test_namespaces_in_the_dashboard(
    served: tuple[str, dict[str, str], AsyncClient],
) -> None:
    need_chromium()
    from playwright.async_api import async_playwright, expect

    base, tokens, client = served
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        errors: list[str] = []
        page = await browser.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{base}/dashboard/#/jobs")
        await page.fill("#token", tokens["acme"])
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.locator("#ns")).to_have_text("namespace acme")
        await expect(page.get_by_role("link", name="acme-job")).to_be_visible()
        await expect(page.get_by_role("link", name="globex-job")).to_have_count(0)

        await page.get_by_role("button", name="Sign out").click()
        await page.fill("#token", tokens["root"])
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_role("link", name="globex-job")).to_be_visible()
        await page.select_option("#ns-filter", "acme")
        await expect(page.get_by_role("link", name="globex-job")).to_have_count(0)
        await expect(page.get_by_role("link", name="acme-job")).to_be_visible()

        await page.get_by_role("link", name="Namespaces").click()
        await page.get_by_label("Jobs of globex").fill("7")
        form = page.locator("form.quota-form").filter(has=page.get_by_label("Jobs of globex"))
        await form.get_by_role("button", name="Set").click()
        await expect(page.get_by_role("cell", name="1 / 7")).to_be_visible()
        await browser.close()
    (globex,) = await client.scoped("globex").list_namespaces()
    assert globex.quotas.max_jobs == 7
    assert errors == []
