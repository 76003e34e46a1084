"""The calendars in headless Chromium: create one (a bad date named in its field), preview
cron day forms, a weekly and a monthly rule and a calendar's exclusion in the new-job form's
live preview, see the excluded fire time struck through on the job page, edit the calendar
(its job re-planned, two times struck), be refused its deletion while a job names it, and
import an .ics file. Screenshots go to test-artifacts/."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from test_dashboard_browser import (  # noqa: F401  (service: the fixture)
    ARTIFACTS,
    BROWSER_ARGS,
    CHROMIUM,
    base_of,
    need_chromium,
    service,
)

from tickwork.runtime.embedded import EmbeddedService

pytestmark = pytest.mark.browser

ICS = ("BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:Xmas\nDTSTART;VALUE=DATE:20301225\n"
       "RRULE:FREQ=YEARLY\nEND:VEVENT\nBEGIN:VEVENT\nSUMMARY:Odd\nDTSTART;VALUE=DATE:20300101\n"
       "RRULE:FREQ=MONTHLY\nEND:VEVENT\nEND:VCALENDAR\n")


async def previewed(page: Any) -> list[datetime]:
    """The draft preview's fire times, from the UTC instant each line shows in brackets."""
    texts = await page.locator("#preview-times li:not(.excluded)").all_inner_texts()
    return [datetime.fromisoformat(t.rsplit("(", 1)[1].rstrip(")")) for t in texts]


async def test_a_calendar_strikes_a_fire_time_on_the_job_page(
        service: EmbeddedService) -> None:  # noqa: F811
    need_chromium()
    from playwright.async_api import async_playwright, expect

    ARTIFACTS.mkdir(exist_ok=True)
    # Dates from a known weekday, so the test means the same whatever day it runs: the job
    # fires Monday to Thursday, and at most four of its fires come before next Wednesday.
    today = datetime.now(UTC).date()
    wednesday = today + timedelta(days=(2 - today.weekday()) % 7 or 7)  # 1 to 7 days ahead
    thursday = wednesday + timedelta(days=1)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        page = await browser.new_page(viewport={"width": 1280, "height": 900},
                                      timezone_id="Europe/Berlin")
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("dialog", lambda dialog: dialog.accept())
        await page.goto(f"{base_of(service)}/dashboard/")
        await page.get_by_role("link", name="Calendars").click()
        await expect(page.get_by_text("No calendars yet.")).to_be_visible()
        await page.fill("#c-name", "holidays")
        await page.fill("#c-dates", "2030-02-30")  # not a date: the field says so
        await page.get_by_role("button", name="Create calendar").click()
        await expect(page.locator("#ce-dates")).to_contain_text("dates[0]")
        await page.fill("#c-dates", f"{wednesday}\n2031-08-01..2031-08-15")
        await page.fill("#c-weekly", "Fri 18:00 - Mon 06:00")
        await page.get_by_role("button", name="Create calendar").click()
        await expect(page.locator("#calendar-name")).to_have_text("holidays")
        await page.screenshot(path=str(ARTIFACTS / "dashboard-calendar.png"))

        # The new-job form's live preview: cron day forms, weekly and monthly rules, and a
        # calendar that strikes a time out of the draft.
        await page.get_by_role("link", name="New job").click()
        await page.fill("#f-name", "noon")
        await page.fill("#f-timezone", "UTC")
        await page.fill("#f-cron", "0 9 L * *")
        await expect(page.locator("#preview-description")).to_contain_text(
            "at 09:00 on the last day of the month")
        await expect(page.locator("#preview-times li")).to_have_count(5)
        assert all((t + timedelta(days=1)).day == 1 and t.hour == 9 for t in await previewed(page))
        await page.select_option("#f-type", "json")
        await page.fill("#f-rule", json.dumps({"weekly": {"days": ["tue", "thu"], "at": "09:00"}}))
        await expect(page.locator("#preview-description")).to_have_text(
            "every week on Tuesday and Thursday at 09:00")
        await expect(page.locator("#preview-times li")).to_have_count(5)
        assert {t.isoweekday() for t in await previewed(page)} == {2, 4}
        await page.fill("#f-rule", json.dumps({"monthly": {"days": [15, "last"], "at": "18:00"}}))
        await expect(page.locator("#preview-description")).to_have_text(
            "on the 15th and the last day of the month at 18:00")
        await expect(page.locator("#preview-times li")).to_have_count(5)
        assert all(t.day == 15 or (t + timedelta(days=1)).day == 1 for t in await previewed(page))
        await page.select_option("#f-type", "cron")
        await page.fill("#f-cron", "0 12 * * 1-4")  # Monday to Thursday: the window spares it
        await page.fill("#f-exclude", "holidays")
        draft_struck = page.locator("#preview-times li.excluded")
        await expect(draft_struck).to_have_count(1)
        await expect(draft_struck).to_contain_text(f"excluded by calendar 'holidays': {wednesday}")
        await expect(page.locator("#preview-times li:not(.excluded)")).to_have_count(5)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-new-job-calendar.png"))
        await page.select_option("#f-kind", "python")
        await page.fill("#f-payload", json.dumps({"callable": "tickwork.cli.demo:tick"}))
        await page.get_by_role("button", name="Create job").click()
        await expect(page.locator("#job-name")).to_have_text("noon")
        struck = page.locator("ol.times li.excluded s")
        await expect(struck).to_have_count(1)
        await expect(page.locator("ol.times li.excluded")).to_contain_text(
            f"excluded by calendar 'holidays': {wednesday}")
        await expect(page.locator("ol.times li:not(.excluded)")).to_have_count(5)
        await page.screenshot(path=str(ARTIFACTS / "dashboard-job-calendar.png"))

        # Edit the calendar: its job is re-planned, and the job page strikes both days.
        await page.goto(f"{base_of(service)}/dashboard/#/calendars/holidays")
        await expect(page.get_by_role("link", name="noon")).to_be_visible()
        await page.fill("#c-dates", f"{wednesday}\n{thursday}\n2031-08-01..2031-08-15")
        await page.get_by_role("button", name="Save calendar").click()
        await expect(page.get_by_role("status")).to_contain_text(
            "Saved (version 2): re-planned 1 job(s)")
        await page.get_by_role("link", name="noon").click()
        await expect(page.locator("#job-name")).to_have_text("noon")
        await expect(struck).to_have_count(2)
        await expect(page.locator("ol.times li.excluded").nth(1)).to_contain_text(str(thursday))

        await page.goto(f"{base_of(service)}/dashboard/#/calendars/holidays")
        await page.get_by_role("button", name="Delete").click()
        await expect(page.get_by_role("status")).to_contain_text("'noon'")

        # Import an .ics file: its yearly holiday is kept, the monthly event left out and named.
        await page.get_by_role("link", name="Calendars").click()
        await page.set_input_files("#c-ics", files=[
            {"name": "xmas.ics", "mimeType": "text/calendar", "buffer": ICS.encode()}])
        await page.get_by_role("button", name="Import").click()
        await expect(page.get_by_role("status")).to_contain_text("Imported xmas; left out: ")
        await expect(page.get_by_role("status")).to_contain_text("Odd")
        imported = page.locator("#calendars tr", has_text="xmas")
        await expect(imported.locator("td").nth(3)).to_have_text("1")  # one yearly date
        await imported.get_by_role("link").click()
        await expect(page.locator("#calendar-name")).to_have_text("xmas")
        await expect(page.locator("#c-yearly")).to_have_value("12-25")
        await browser.close()
    assert errors == []
