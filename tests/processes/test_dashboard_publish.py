"""The dashboard's job form makes a publish job on an interval spread by ``"offset": "auto"``,
in headless Chromium: the draft preview says the offset is automatic, the job page gives its
value, the job runs and its message reaches a consumer of the Redis stream it names.
Screenshots go to test-artifacts/ (git-ignored)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tickwork.bench.consumers import RedisConsumer
from tickwork.config import Settings
from tickwork.executors.base import ExecutorSettings
from tickwork.runtime.embedded import EmbeddedService
from tickwork.testing.brokers import require, unique

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.browser


def need_chromium() -> None:
    if CHROMIUM.exists():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is missing; CI must install Debian's chromium")
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium); the browser test needs it")


@pytest.fixture
async def consumer() -> AsyncIterator[RedisConsumer]:
    found = RedisConsumer(require("redis"))
    found.name = unique()  # a stream of its own on the shared Redis, deleted after
    await found.start()
    try:
        yield found
    finally:
        await found.close()


@pytest.fixture
async def service(tmp_path: Path, consumer: RedisConsumer) -> AsyncIterator[EmbeddedService]:
    settings = Settings(database=f"sqlite:///{tmp_path}/ui.db", port=0, open_access=True,
                        planner_interval_seconds=0.2, planner_horizon_seconds=1,
                        poll_interval_seconds=0.2, shutdown_grace_seconds=1,
                        executors=ExecutorSettings(brokers=(("events", consumer.url),),
                                                   outbound_allow=("127.0.0.1",)))
    svc = EmbeddedService(settings)
    await svc.start()
    yield svc
    await svc.stop()


async def test_the_form_creates_a_publish_job_with_an_automatic_offset(
        service: EmbeddedService, consumer: RedisConsumer) -> None:
    need_chromium()
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{service.api.url}/dashboard/#/new")
        await page.fill("#f-name", "publish-browser")
        await page.select_option("#f-type", "every")
        await page.fill("#f-every", "2s")
        await page.fill("#f-offset", "sometimes")  # a bad value: the field says why, live
        await expect(page.locator("#e-offset")).to_contain_text("auto")
        await page.fill("#f-offset", "auto")
        await expect(page.locator("#preview-description")).to_have_text(
            "every 2 seconds (offset auto)")
        await page.select_option("#f-kind", "publish")
        assert json.loads(await page.input_value("#f-payload"))["broker"] == "events"
        await page.fill("#f-payload", json.dumps({"broker": "events", "stream": consumer.name,
                                                  "body": {"from": "browser"}}))
        await page.screenshot(path=str(ARTIFACTS / "dashboard-new-publish-job.png"))
        await page.get_by_role("button", name="Create job").click()

        await expect(page.locator("#job-name")).to_have_text("publish-browser")
        await expect(page.get_by_text("every 2 seconds (offset ")).to_contain_text(", auto)")
        await expect(page.locator("tr.run[data-state=succeeded]").first).to_be_visible(
            timeout=20_000)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-publish-job.png"))
        await browser.close()
    assert errors == []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    got = consumer.drain()
    while not got and loop.time() < deadline:  # the message is in the stream: poll it in
        await asyncio.sleep(0.1)
        got = consumer.drain()
    assert got, "no message reached the stream"
    assert got[0].attempt == 1
