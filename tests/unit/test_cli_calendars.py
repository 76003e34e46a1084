"""``tickwork calendars ...`` in-process, and ``jobs show`` naming the times a calendar drops.
Bad input exits 2 with one line and no traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_cli import tw  # noqa: F401  (the fixture)

ICS = ("BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:Xmas\nDTSTART;VALUE=DATE:20301225\n"
       "RRULE:FREQ=YEARLY\nEND:VEVENT\nBEGIN:VEVENT\nSUMMARY:Odd\nDTSTART;VALUE=DATE:20300101\n"
       "RRULE:FREQ=MONTHLY\nEND:VEVENT\nEND:VCALENDAR\n")


def job(schedule: dict[str, Any]) -> str:
    return json.dumps({"name": "daily", "kind": "http", "schedule": schedule,
                       "payload": {"url": "https://example.org/"}})


def test_create_list_show_update_delete(tw: Any) -> None:  # noqa: F811
    code, out, err = tw("calendars", "create", "holidays", "--date", "2040-01-02",
                        "--range", "2040-08-01..2040-08-15", "--yearly", "12-25",
                        "--weekly", "Sat-Sun", "--description", "days off")
    assert code == 0, err
    assert out.strip() == "created calendar holidays (version 1)"
    code, out, _ = tw("calendars", "list", "--json")
    [listed] = json.loads(out)
    assert listed["dates"] == ["2040-01-02", {"from": "2040-08-01", "to": "2040-08-15"}]
    assert (listed["yearly"], listed["weekly"]) == (["12-25"], ["Sat-Sun"])
    code, out, _ = tw("calendars", "list")
    assert "holidays" in out
    assert "Sat-Sun" in out

    assert tw("jobs", "create", "--json", "-", stdin=job(
        {"cron": "0 9 * * *", "exclude": ["holidays"]}))[0] == 0
    code, out, _ = tw("calendars", "show", "holidays")
    assert "daily" in out
    assert "2040-08-01 to 2040-08-15" in out
    code, out, _ = tw("calendars", "update", "holidays", "--date", "2040-01-03")
    assert code == 0
    assert "re-planned 1 job(s)" in out

    code, _, err = tw("calendars", "delete", "holidays")
    assert code == 2
    assert err.count("\n") == 1
    assert "'daily'" in err
    assert tw("jobs", "delete", "daily")[0] == 0
    assert tw("calendars", "delete", "holidays")[0] == 0
    assert json.loads(tw("calendars", "list", "--json")[1]) == []


def test_jobs_show_strikes_the_dropped_times(tw: Any) -> None:  # noqa: F811
    tw("calendars", "create", "weekend", "--weekly", "Sat-Sun")
    tw("jobs", "create", "--json", "-", stdin=job({"cron": "0 9 * * *", "exclude": ["weekend"]}))
    code, out, _ = tw("jobs", "show", "daily", "--next", "7")
    assert code == 0
    assert "skipped: excluded by calendar 'weekend': weekly Sat-Sun" in out
    shown = json.loads(tw("jobs", "show", "daily", "--next", "7", "--json")[1])
    assert len(shown["next_fire_times"]) == 7
    assert {f["excluded_by"] for f in shown["excluded_fire_times"]} == {"weekend"}


def test_import(tw: Any, tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / "holidays.ics"
    path.write_text(ICS, encoding="utf-8")
    code, out, err = tw("calendars", "import", str(path))
    assert code == 0, err
    assert "created calendar holidays" in out
    assert "1 yearly date(s)" in out
    assert "Odd" in err  # left out, and said so
    assert tw("calendars", "import", str(path))[0] == 2  # exists
    code, out, _ = tw("calendars", "import", str(path), "--replace")
    assert (code, "updated calendar holidays (version 2)" in out) == (0, True)


def test_bad_input_is_one_line_and_exit_2(tw: Any, tmp_path: Path) -> None:  # noqa: F811
    for args in (("calendars", "create", "bad name"),
                 ("calendars", "create", "h", "--date", "2040-02-30"),
                 ("calendars", "create", "h", "--range", "2040-01-01"),
                 ("calendars", "create", "h", "--weekly", "Caturday"),
                 ("calendars", "import", str(tmp_path / "missing.ics")),
                 ("calendars", "show", "nope")):
        code, _, err = tw(*args)
        assert code == 2, args
        assert err.startswith("tickwork: error: ")
        assert err.count("\n") == 1, err
    code, _, err = tw("jobs", "create", "--json", "-", stdin=job(
        {"cron": "0 9 * * *", "exclude": ["nope"]}))
    assert (code, "schedule.exclude[0]" in err) == (2, True)
    bad = tmp_path / "bad.ics"
    bad.write_text("not a calendar", encoding="utf-8")
    code, _, err = tw("calendars", "import", str(bad))
    assert (code, "not an iCalendar file" in err) == (2, True)
