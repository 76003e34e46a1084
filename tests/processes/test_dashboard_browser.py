"""The dashboard end to end in headless Chromium: create a job through the form, watch it run,
open its run history; list runs on the Runs page, filter them by state, queue, job and time,
open a run that failed before it succeeded; see a paused job without a next run; cancel a
running run and retry a dead one, and read both in the job's history; preview a backfill and
confirm it, and see its runs in the job's history; the same dashboard mounted under a prefix
(the calendars: test_dashboard_calendars_browser.py). Screenshots go to test-artifacts/
(git-ignored)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from fastapi import FastAPI

from tickwork.api import create_app
from tickwork.api.server import ApiServer
from tickwork.config import Settings
from tickwork.executors.base import ExecutorSettings
from tickwork.runtime.embedded import EmbeddedService

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
async def service(tmp_path: Path) -> AsyncIterator[EmbeddedService]:
    settings = Settings(database=f"sqlite:///{tmp_path}/ui.db", port=0, open_access=True,
                        planner_interval_seconds=0.2, planner_horizon_seconds=1,
                        poll_interval_seconds=0.2, shutdown_grace_seconds=1,
                        executors=ExecutorSettings(python_allowed_modules=("tickwork.cli.demo",
                                                                               "tickwork.testing.jobs")))
    svc = EmbeddedService(settings)
    await svc.start()
    yield svc
    await svc.stop()


async def test_create_a_job_watch_it_run_and_read_its_history(service: EmbeddedService) -> None:
    need_chromium()
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(exist_ok=True)
    base = service.api.url
    name = "hello browser ✓"
    markup = "<b>browser</b>"  # user text with markup must show as text, never as markup
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900},
                                      timezone_id="Europe/Berlin")
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{base}/dashboard/")
        await expect(page.get_by_text("Runs by state")).to_be_visible()
        await expect(page.locator("#tz")).to_have_text("Europe/Berlin")

        await page.get_by_role("link", name="New job").click()
        await page.fill("#f-name", name)
        await page.select_option("#f-type", "every")
        await page.fill("#f-every", "2s")
        await page.select_option("#f-kind", "python")
        await page.fill("#f-payload", json.dumps({"callable": "tickwork.cli.demo:tick",
                                                  "args": [markup]}))
        await expect(page.locator("#preview-description")).to_contain_text("2")
        await expect(page.locator("#preview-times li")).to_have_count(5)
        await page.fill("#f-every", "0s")  # a bad value: the field says why, live
        await expect(page.locator("#e-every")).not_to_be_empty()
        await page.fill("#f-every", "2s")
        await expect(page.locator("#preview-times li")).to_have_count(5)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-new-job.png"))
        await page.get_by_role("button", name="Create job").click()

        await expect(page.locator("#job-name")).to_have_text(name)
        succeeded = page.locator("tr.run[data-state=succeeded]").first
        await expect(succeeded).to_be_visible(timeout=20_000)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-job.png"))
        await succeeded.click()
        await expect(page.locator("pre.output").first).to_contain_text(f"tick {markup}")
        assert await page.locator("pre.output b").count() == 0  # not parsed as markup
        await page.screenshot(path=str(ARTIFACTS / "dashboard-run-history.png"))

        await page.get_by_role("button", name="Trigger now").click()
        await expect(page.get_by_text("Trigger now: done")).to_be_visible()
        await page.get_by_role("link", name="Jobs", exact=True).click()
        await page.fill("input[type=search]", "browser")
        await expect(page.locator("#jobs tbody tr")).to_have_count(1)
        await page.get_by_role("link", name="Overview").click()
        await expect(page.locator("svg.plot")).to_have_count(2)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-overview.png"))
        await browser.close()
    assert errors == []


FLAKY = {"name": "flaky-browser", "schedule": {"every": "3600"}, "kind": "python",
         "payload": {"callable": "tickwork.cli.demo:flaky"},
         "retry": {"max_attempts": 3, "backoff_base_seconds": 0.2, "backoff_max_seconds": 0.5}}
PAUSED = {"name": "paused-browser", "schedule": {"every": 90}, "kind": "python",
          "payload": {"callable": "tickwork.cli.demo:tick", "args": ["paused"]}, "paused": True}


async def test_runs_page_filters_and_a_run_with_a_failed_attempt(
    service: EmbeddedService,
) -> None:
    need_chromium()
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(exist_ok=True)
    client = service.client
    assert client is not None
    await client.create_job(FLAKY)
    await client.create_job(PAUSED)
    triggered = (await client.trigger_job("flaky-browser")).scheduled_at
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900},
                                      timezone_id="Europe/Berlin")
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{service.api.url}/dashboard/")
        await page.get_by_role("link", name="Runs", exact=True).click()
        await expect(page.locator("#runs-table")).to_be_visible()
        # Only succeeded runs: the flaky job's, once its retry succeeded.
        await page.locator("#run-states input[value=succeeded]").check()
        succeeded = page.locator("#runs-table tr.run[data-state=succeeded]")
        for _ in range(40):  # the page does not refresh by itself: reload until it shows
            if await succeeded.count():
                break
            await page.wait_for_timeout(500)
            await page.locator("#run-states input[value=succeeded]").uncheck()
            await page.locator("#run-states input[value=succeeded]").check()
        await expect(succeeded).to_have_count(1)
        await expect(page.locator("#runs-table tr.run")).to_have_count(1)  # the filter holds
        await page.fill("#run-queue", "no-such-queue")
        await expect(page.get_by_text("No runs match.")).to_be_visible()
        await page.fill("#run-queue", "default")
        await expect(succeeded).to_have_count(1)
        # The job filter: a job without runs, a job that does not exist, the flaky one.
        await page.fill("#run-job", "paused-browser")
        await expect(page.get_by_text("No runs match.")).to_be_visible()
        await page.fill("#run-job", "no-such-job")
        await expect(page.get_by_text("No job named no-such-job.")).to_be_visible()
        await page.fill("#run-job", "flaky-browser")
        await expect(succeeded).to_have_count(1)
        # The time range, in the browser's zone (datetime-local): from a second after the
        # run, nothing; around it, the run; before the second it was scheduled in, nothing.
        berlin = ZoneInfo("Europe/Berlin")

        def local(t: datetime) -> str:
            return t.astimezone(berlin).strftime("%Y-%m-%dT%H:%M:%S")

        await page.fill("#run-since", local(triggered + timedelta(seconds=1)))
        await expect(page.get_by_text("No runs match.")).to_be_visible()
        await page.fill("#run-since", local(triggered - timedelta(minutes=1)))
        await page.fill("#run-until", local(triggered + timedelta(minutes=1)))
        await expect(succeeded).to_have_count(1)
        await page.fill("#run-until", local(triggered.replace(microsecond=0)))
        await expect(page.get_by_text("No runs match.")).to_be_visible()
        await page.fill("#run-until", "")
        await expect(succeeded).to_have_count(1)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-runs.png"))

        await succeeded.get_by_role("link").click()
        await expect(page.locator("#run-title")).to_have_text("Run of flaky-browser")
        attempts = page.locator("#run-attempts .attempt")
        await expect(attempts).to_have_count(2)
        await expect(attempts.nth(0)).to_contain_text("Attempt 1")
        await expect(attempts.nth(0).locator(".badge.failed")).to_be_visible()
        await expect(attempts.nth(0).locator("pre.error-text")).to_contain_text(
            "first attempts of demo-flaky always fail")
        await expect(attempts.nth(1).locator(".badge.succeeded")).to_be_visible()
        await page.screenshot(path=str(ARTIFACTS / "dashboard-run.png"))

        await page.get_by_role("link", name="Jobs", exact=True).click()
        paused_row = page.locator("#jobs tbody tr", has_text="paused-browser")
        await expect(paused_row.locator("td.next-run")).to_have_text("paused")
        await expect(paused_row).to_contain_text("every 1m30s")
        flaky_row = page.locator("#jobs tbody tr", has_text="flaky-browser")
        await expect(flaky_row).to_contain_text("every 1h")
        await paused_row.get_by_role("link").click()
        await expect(page.locator("dd", has_text="paused")).to_have_count(1)
        await expect(page.get_by_text("Paused: nothing fires until it is resumed.")
                     ).to_be_visible()
        await browser.close()
    assert errors == []


async def test_the_dashboard_works_mounted_under_a_prefix(service: EmbeddedService) -> None:
    need_chromium()
    from playwright.async_api import async_playwright, expect

    assert service.client is not None
    await service.client.create_job(PAUSED)
    outer = FastAPI()
    outer.mount("/scheduler", create_app(service.client, open_access=True))
    server = ApiServer(outer, host="127.0.0.1", port=0)
    await server.start()
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
            page = await browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"{server.url}/scheduler/")
            assert page.url == f"{server.url}/scheduler/dashboard/"
            await expect(page.get_by_text("Runs by state")).to_be_visible()
            await page.get_by_role("link", name="Jobs", exact=True).click()
            await expect(page.locator("#jobs tbody tr", has_text="paused-browser")).to_be_visible()
            await browser.close()
        assert errors == []
    finally:
        await server.stop()


def base_of(service: EmbeddedService) -> str:
    return service.api.url


DOOMED = {"name": "doomed-browser", "schedule": {"every": "3600"}, "kind": "python",
          "payload": {"callable": "tickwork.cli.demo:flaky"}, "retry": {"max_attempts": 1},
          "alerts": {"channels": [{"kind": "webhook", "url": "http://127.0.0.1:1/closed"}]}}


async def test_the_alerts_page_shows_a_fired_alert(service: EmbeddedService) -> None:
    """A run that goes dead fires its job's alert; the Alerts page lists it with its
    delivery (to a closed port: retried and recorded), and the job page shows it firing."""
    need_chromium()
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(exist_ok=True)
    client = service.client
    assert client is not None
    await client.create_job(DOOMED)
    await client.trigger_job("doomed-browser")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{service.api.url}/dashboard/")
        await page.get_by_role("link", name="Alerts", exact=True).click()
        rows = page.locator("table.alerts tr.alert-row")
        for _ in range(40):  # the page does not refresh by itself: reload until it shows
            if await rows.count():
                break
            await page.wait_for_timeout(500)
            await page.reload()
        await expect(rows).to_have_count(1)
        await expect(rows.first).to_contain_text("doomed-browser")
        await expect(rows.first).to_contain_text("firing")
        await expect(rows.first).to_contain_text("ended dead")
        await expect(rows.first.locator("li.delivery")).to_contain_text("firing via webhook #0")
        await page.screenshot(path=str(ARTIFACTS / "dashboard-alerts.png"))
        await rows.first.get_by_role("link", name="doomed-browser").click()
        await expect(page.locator("#job-alerts")).to_contain_text("Firing: failed")
        await browser.close()
        assert errors == []


HANGS = {"name": "hang-browser", "schedule": {"every": "3600"}, "kind": "python",
         "payload": {"callable": "tickwork.testing.jobs:wait_forever", "args": ["hang-browser"]},
         "timeout_seconds": 300}
DIES = {"name": "dead-browser", "schedule": {"every": "3600"}, "kind": "python",
        "payload": {"callable": "tickwork.cli.demo:flaky"}, "retry": {"max_attempts": 1}}


async def test_cancel_a_running_run_and_retry_a_dead_one(service: EmbeddedService) -> None:
    need_chromium()
    import asyncio
    import threading

    from playwright.async_api import async_playwright, expect

    from tickwork.testing.jobs import EVENTS

    ARTIFACTS.mkdir(exist_ok=True)
    EVENTS["hang-browser:started"] = threading.Event()
    EVENTS["hang-browser"] = threading.Event()
    client = service.client
    assert client is not None
    await client.create_job(HANGS)
    await client.create_job(DIES)
    await client.trigger_job("hang-browser")
    await client.trigger_job("dead-browser")
    assert await asyncio.to_thread(EVENTS["hang-browser:started"].wait, 20)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
        await page.goto(f"{base_of(service)}/dashboard/#/jobs/hang-browser")
        running = page.locator("#runs tr.run[data-state=running]")
        await expect(running).to_have_count(1, timeout=15000)
        await running.locator("button.run-cancel").click()
        cancelled = page.locator("#runs tr.run[data-state=cancelled]")
        await expect(cancelled).to_have_count(1)
        await expect(cancelled).to_contain_text("cancelled by open-access")
        assert await asyncio.to_thread(EVENTS["hang-browser"].wait, 10)  # the task was stopped
        await expect(page.locator("#job-history tr.audit[data-action=cancel]")).to_have_count(1)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-cancel.png"))

        await page.goto(f"{base_of(service)}/dashboard/#/jobs/dead-browser")
        dead = page.locator("#runs tr.run[data-state=dead]")
        await expect(dead).to_have_count(1, timeout=15000)
        await expect(dead).to_contain_text("1/1")
        await dead.locator("button.run-retry").click()
        # it ran again as attempt 2 (and, flaky on its early attempts, died again)
        await expect(page.locator("#runs tr.run", has_text="2/1")).to_have_count(1, timeout=15000)
        await expect(page.locator("#job-history tr.audit[data-action=retry]")).to_have_count(1)
        await expect(page.locator("#job-history tr.audit[data-action=create]")).to_have_count(1)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-retry.png"))
        await browser.close()
    assert errors == []


HOURLY = {"name": "hourly-browser", "schedule": {"cron": "0 * * * *"}, "kind": "python",
          "payload": {"callable": "tickwork.cli.demo:tick", "args": ["backfilled"]}}


async def test_preview_and_confirm_a_backfill(service: EmbeddedService) -> None:
    """The job page's Backfill form previews the fire times of a past range (nothing is
    created yet), and Confirm creates them: the runs show in the job's run history."""
    need_chromium()
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(exist_ok=True)
    client = service.client
    assert client is not None
    await client.create_job(HOURLY)
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=3)
    local = "%Y-%m-%dT%H:%M:%S"  # datetime-local, in the page's zone (UTC below)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 1400},
                                      timezone_id="UTC")
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{base_of(service)}/dashboard/#/jobs/hourly-browser")
        await expect(page.locator("#job-backfill")).to_be_visible()
        await page.fill("#bf-from", start.strftime(local))
        await page.fill("#bf-to", end.strftime(local))
        await page.get_by_role("button", name="Preview").click()
        await expect(page.locator("#bf-count")).to_have_text(
            "3 fire times: 3 new, 0 with a run already (left as they are)")
        await expect(page.locator("#bf-times li")).to_have_count(3)
        await expect(page.locator("#bf-warning")).to_contain_text("under skip")
        assert await page.locator("#runs tr.run").count() == 0  # a preview creates nothing
        await page.select_option("#bf-overlap", "allow_all")
        await expect(page.locator("#bf-confirm")).to_be_hidden()  # the preview was dropped
        await page.get_by_role("button", name="Preview").click()
        await expect(page.locator("#bf-preview")).to_contain_text("allow_all (chosen")
        await expect(page.locator("#bf-warning")).to_have_count(0)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-backfill-preview.png"))
        await page.get_by_role("button", name="Confirm: create 3 runs").click()
        await expect(page.get_by_text("Backfill: created 3 runs")).to_be_visible()
        runs = page.locator("#runs tr.run", has_text="backfill")
        await expect(runs).to_have_count(3)
        await expect(page.locator("#runs tr.run[data-state=succeeded]")).to_have_count(
            3, timeout=20_000)  # allow_all: every one ran
        await expect(page.locator("#job-history tr.audit[data-action=backfill]")).to_have_count(1)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-backfill.png"))
        await browser.close()
    assert errors == []


PAYMENTS = {"name": "pay-browser", "queue": "payments", "schedule": {"every": "3600"},
            "kind": "python", "payload": {"callable": "tickwork.cli.demo:tick"},
            "paused": True}


async def test_set_queue_and_named_limits_on_the_limits_page(service: EmbeddedService) -> None:
    """The Limits page sets a queue's limits and a named limit through the API, shows them
    with their usage, says why a bad rate is refused, and deletes a named limit."""
    need_chromium()
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(exist_ok=True)
    client = service.client
    assert client is not None
    await client.create_job(PAYMENTS)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{service.api.url}/dashboard/")
        await page.get_by_role("link", name="Limits", exact=True).click()
        row = page.locator("table.queue-limits tbody tr", has_text="payments")
        await row.get_by_label("Max running").fill("3")
        await row.get_by_label("Rate").fill("50/s")
        await row.get_by_label("Burst").fill("10")
        await row.get_by_role("button", name="Save").click()
        await expect(page.locator(".notice.ok")).to_contain_text("Limits of queue payments saved")
        await expect(row.locator("td.usage")).to_have_text(
            "0 of 3 running, 50/s burst 10 (10.0 left)")
        await row.get_by_label("Rate").fill("fast")
        await row.get_by_role("button", name="Save").click()
        await expect(page.locator(".notice")).to_contain_text("is not a rate")
        keys = page.locator("table.key-limits")
        await page.get_by_label("Key", exact=True).fill("github-api")
        await page.locator("input[name=key-rate]").fill("100/min")
        await page.get_by_role("button", name="Set limit").click()
        await expect(keys.locator("tbody tr", has_text="github-api")).to_contain_text(
            "100/min burst 100")
        await page.screenshot(path=str(ARTIFACTS / "dashboard-limits.png"))
        queue = next(q for q in await client.list_queues() if q.name == "payments")
        assert (queue.max_running, str(queue.rate), queue.burst) == (3, "50/s", 10)
        await keys.get_by_role("button", name="Delete").click()
        await expect(keys).to_contain_text("No named limits.")
        assert await client.list_limits() == []
        await page.get_by_role("link", name="Overview", exact=True).click()
        await expect(page.get_by_role("link", name="0 of 3 running, 50/s burst 10 (10.0 left)")
                     ).to_be_visible()
        await browser.close()
        assert errors == []
