"""/api/v1/calendars: CRUD, import, 422s naming the field, 409 on deleting one in use, auth,
and previews that show the fire times a calendar drops."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_api import Api, assert_problem, open_api

HOLIDAYS = {"name": "holidays", "description": "Public holidays",
            "dates": ["2030-01-02", {"from": "2030-08-01", "to": "2030-08-15"}],
            "yearly": ["12-25"], "weekly": []}
JOB = {"name": "daily", "schedule": {"cron": "0 9 * * *", "exclude": ["holidays"]},
       "kind": "http", "payload": {"url": "https://example.org/hook"}}
ICS = ("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nSUMMARY:Day\r\nDTSTART;VALUE=DATE:20300102\r\n"
       "RRULE:FREQ=YEARLY\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    a, store = await open_api(tmp_path)
    yield a
    await a.http.aclose()
    await store.close()


async def test_create_read_list_update_delete(api: Api) -> None:
    r = await api.post("/api/v1/calendars", json=HOLIDAYS)
    assert r.status_code == 201, r.text
    assert r.json()["dates"] == HOLIDAYS["dates"]
    assert r.json()["version"] == 1
    r = await api.get("/api/v1/calendars")
    assert [c["name"] for c in r.json()["items"]] == ["holidays"]
    r = await api.get("/api/v1/calendars/holidays")
    assert r.json()["jobs"] == []
    r = await api.http.put("/api/v1/calendars/holidays", headers=api.auth("write"),
                           json={"dates": ["2030-01-03"]})
    assert r.status_code == 200, r.text
    assert (r.json()["dates"], r.json()["version"], r.json()["replanned_jobs"]) == (
        ["2030-01-03"], 2, 0)
    assert (await api.delete("/api/v1/calendars/holidays")).status_code == 204
    assert_problem(await api.get("/api/v1/calendars/holidays"), 404)


async def test_bad_documents_are_422_naming_the_field(api: Api) -> None:
    r = await api.post("/api/v1/calendars", json={"name": "h", "dates": ["2030-02-30"]})
    assert assert_problem(r, 422)["errors"] == [
        {"field": "dates[0]", "message": "must be a date such as 2030-12-25 (got '2030-02-30')"}]
    r = await api.post("/api/v1/calendars", json={"name": "h", "weekly": ["Fri 18:00 - Mon"]})
    assert assert_problem(r, 422)["errors"][0]["field"] == "weekly[0]"
    r = await api.post("/api/v1/calendars", json={"name": "no spaces"})
    assert assert_problem(r, 422)["errors"][0]["field"] == "name"
    r = await api.post("/api/v1/calendars", json=["not", "an", "object"])
    assert_problem(r, 422)
    r = await api.http.put("/api/v1/calendars/h", headers=api.auth("write"),
                           json={"name": "other"})
    assert assert_problem(r, 422)["errors"][0]["field"] == "name"


async def test_a_duplicate_name_is_409(api: Api) -> None:
    await api.post("/api/v1/calendars", json=HOLIDAYS)
    assert_problem(await api.post("/api/v1/calendars", json=HOLIDAYS), 409)


async def test_deleting_a_calendar_in_use_is_409_naming_the_jobs(api: Api) -> None:
    await api.post("/api/v1/calendars", json=HOLIDAYS)
    assert (await api.post("/api/v1/jobs", json=JOB)).status_code == 201
    body = assert_problem(await api.delete("/api/v1/calendars/holidays"), 409)
    assert "'daily'" in body["detail"]
    assert (await api.get("/api/v1/calendars/holidays")).json()["jobs"] == ["daily"]


async def test_a_job_naming_an_unknown_calendar_is_422(api: Api) -> None:
    r = await api.post("/api/v1/jobs", json=JOB)
    assert assert_problem(r, 422)["errors"][0]["field"] == "schedule.exclude[0]"
    r = await api.post("/api/v1/preview", json={"schedule": JOB["schedule"]})
    assert assert_problem(r, 422)["errors"][0]["field"] == "schedule.exclude[0]"


async def test_preview_shows_excluded_times_with_the_calendar(api: Api) -> None:
    await api.post("/api/v1/calendars", json=HOLIDAYS)
    await api.post("/api/v1/jobs", json=JOB)
    body = (await api.get("/api/v1/jobs/daily/preview", params={"count": 2})).json()
    assert body["times"] == ["2030-01-01T09:00:00Z", "2030-01-03T09:00:00Z"]
    assert body["fires"] == [
        {"at": "2030-01-01T09:00:00Z", "excluded_by": None, "reason": None},
        {"at": "2030-01-02T09:00:00Z", "excluded_by": "holidays",
         "reason": "excluded by calendar 'holidays': 2030-01-02"},
        {"at": "2030-01-03T09:00:00Z", "excluded_by": None, "reason": None}]
    assert "except on what calendar 'holidays' covers" in body["description"]
    draft = {"schedule": {"monthly": {"business_day": 2, "at": "09:00"},
                          "exclude": ["holidays"], "timezone": "Europe/Paris"}, "count": 1}
    body = (await api.post("/api/v1/preview", json=draft)).json()
    assert body["times"] == ["2030-01-03T08:00:00Z"]  # Jan 1 a Tuesday, Jan 2 a holiday
    assert body["timezone"] == "Europe/Paris"


async def test_updating_a_calendar_replans_its_jobs(api: Api) -> None:
    await api.post("/api/v1/calendars", json=HOLIDAYS)
    await api.post("/api/v1/jobs", json=JOB)
    r = await api.http.put("/api/v1/calendars/holidays", headers=api.auth("write"),
                           json={"dates": ["2030-01-01"]})
    assert r.json()["replanned_jobs"] == 1
    job = (await api.get("/api/v1/jobs/daily")).json()
    assert job["next_run_at"] == "2030-01-02T09:00:00Z"


async def test_import(api: Api) -> None:
    r = await api.post("/api/v1/calendars/import", json={"name": "hol", "ics": ICS})
    assert r.status_code == 201, r.text
    assert r.json()["yearly"] == [{"on": "01-02", "from": "2030-01-02"}]
    assert r.json()["warnings"] == []
    r = await api.post("/api/v1/calendars/import", json={"name": "hol", "ics": "nope"})
    assert assert_problem(r, 422)["errors"][0]["field"] == "ics"
    r = await api.post("/api/v1/calendars/import", json={"name": "hol", "ics": ICS,
                                                          "replace": "yes"})
    assert assert_problem(r, 422)["errors"][0]["field"] == "replace"


async def test_auth(api: Api) -> None:
    assert_problem(await api.http.get("/api/v1/calendars"), 401)
    assert_problem(await api.post("/api/v1/calendars", scope="read", json=HOLIDAYS), 403)
    assert (await api.post("/api/v1/calendars", scope="write", json=HOLIDAYS)).status_code == 201
    assert_problem(await api.delete("/api/v1/calendars/holidays", scope="read"), 403)
    assert (await api.get("/api/v1/calendars/holidays", scope="read")).status_code == 200
