"""The dashboard's Enqueue page in headless Chromium: enqueue a one-off job without a name,
watch it run, enqueue again with its dedupe key and get the same job back, see a bad field
named; the retention settings on the overview. Screenshots go to test-artifacts/."""

from __future__ import annotations

import json

import pytest
from test_dashboard_browser import (  # noqa: F401  (service: the fixture)
    ARTIFACTS,
    BROWSER_ARGS,
    CHROMIUM,
    need_chromium,
    service,
)

from tickwork.runtime.embedded import EmbeddedService

pytestmark = pytest.mark.browser


async def test_enqueue_a_one_off_job_and_see_the_retention(
        service: EmbeddedService) -> None:  # noqa: F811
    need_chromium()
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(exist_ok=True)
    assert service.api is not None
    base = service.api.url
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 1000},
                                      timezone_id="Europe/Berlin")
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{base}/dashboard/")
        await expect(page.locator("#retention-jobs")).to_have_text("7d")
        await expect(page.locator("#retention-history")).to_have_text("30d")

        await page.get_by_role("link", name="Enqueue").click()
        await page.select_option("#q-kind", "python")
        await page.fill("#q-payload", json.dumps({"callable": "tickwork.cli.demo:tick",
                                                  "args": ["enqueued"]}))
        await page.fill("#q-dedupe_key", "browser-key")
        await page.fill("#q-dedupe_window", "10m")
        await page.get_by_role("button", name="Enqueue").click()
        await expect(page.locator("#enqueue-result")).to_contain_text("Enqueued python-")
        name = await page.locator("#enqueued-job").text_content()
        await page.screenshot(path=str(ARTIFACTS / "dashboard-enqueue.png"))

        await page.get_by_role("button", name="Enqueue").click()  # the key is held
        await expect(page.locator("#enqueue-result")).to_contain_text("nothing enqueued")
        await expect(page.locator("#enqueued-job")).to_have_text(name or "")

        await page.locator("#enqueued-job").click()
        await expect(page.locator("#job-name")).to_have_text(name or "")
        await expect(page.locator("tr.run[data-state=succeeded]").first).to_be_visible(
            timeout=20_000)

        await page.get_by_role("link", name="Enqueue").click()
        await page.fill("#q-payload", json.dumps({"url": "https://example.org/hook"}))
        await page.fill("#q-dedupe_window", "0")
        await page.get_by_role("button", name="Enqueue").click()
        await expect(page.locator("#qe-dedupe_window")).to_contain_text(
            "dedupe_window_seconds")
        await browser.close()
    assert errors == []
