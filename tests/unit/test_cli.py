"""The CLI in-process: every listing has --json; bad input exits 2 with one line, no traceback."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from tickwork.cli.main import main

PY_JOB = {"name": "hello", "schedule": {"every": "10s"}, "kind": "python",
          "payload": {"callable": "tickwork.cli.demo:tick", "args": ["x"]},
          "timeout_seconds": 5, "retry": {"max_attempts": 1}}


@pytest.fixture
def tw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    for key in [k for k in __import__("os").environ if k.startswith("TICKWORK_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TICKWORK_DATABASE_URL", f"sqlite:///{tmp_path}/cli.db")

    def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_create_show_list_and_delete(tw: Any) -> None:
    code, out, err = tw("jobs", "create", "--json", "-", stdin=json.dumps(PY_JOB))
    assert code == 0, err
    assert out.startswith("created job hello (")

    code, out, _ = tw("jobs", "list", "--json")
    [job] = json.loads(out)
    assert (job["name"], job["kind"]) == ("hello", "python")
    assert job["schedule"] == {"every": 10, "offset": 0}

    code, out, _ = tw("jobs", "show", "hello", "--json", "--next", "3")
    shown = json.loads(out)
    assert shown["description"] == "every 10 seconds"
    assert len(shown["next_fire_times"]) == 3

    assert tw("jobs", "pause", "hello")[0] == 0
    assert json.loads(tw("jobs", "list", "--paused", "--json")[1])[0]["paused"] is True
    assert tw("jobs", "resume", "hello")[0] == 0
    assert json.loads(tw("jobs", "list", "--active", "--json")[1])[0]["name"] == "hello"

    code, out, _ = tw("jobs", "trigger", "hello", "--json")
    run = json.loads(out)
    assert (run["trigger"], run["state"]) == ("manual", "scheduled")
    assert ":manual:" in run["idempotency_key"]

    code, out, _ = tw("runs", "list", "--json")
    assert [r["job_name"] for r in json.loads(out)] == ["hello"]

    assert tw("jobs", "delete", "hello")[0] == 0
    assert json.loads(tw("jobs", "list", "--json")[1]) == []
    code, _, err = tw("jobs", "show", "hello")
    assert (code, err) == (2, "tickwork: error: no job 'hello'\n")


def test_bulk_create_from_an_array_and_from_ndjson(tw: Any) -> None:
    docs = [{**PY_JOB, "name": f"job-{i}"} for i in range(50)]
    assert tw("jobs", "create", "--json", "-", stdin=json.dumps(docs))[1] == "created 50 jobs\n"
    ndjson = "\n".join(json.dumps({**PY_JOB, "name": f"nd-{i}"}) for i in range(3))
    assert tw("jobs", "create", "--json", "-", stdin=ndjson)[1] == "created 3 jobs\n"
    names = [j["name"] for j in json.loads(tw("jobs", "list", "--json", "--limit", "500")[1])]
    assert len(names) == 53


def test_update_changes_only_the_given_fields(tw: Any) -> None:
    tw("jobs", "create", "--json", "-", stdin=json.dumps(PY_JOB))
    code, _, err = tw("jobs", "update", "hello", "--json", "-",
                        stdin='{"schedule": {"cron": "0 3 * * *"}, "tags": ["night"]}')
    assert code == 0, err
    [job] = json.loads(tw("jobs", "list", "--json")[1])
    assert job["schedule"]["cron"] == "0 3 * * *"
    assert job["tags"] == ["night"]
    assert job["payload"]["callable"] == "tickwork.cli.demo:tick"
    assert job["next_run_at"].endswith("T03:00:00Z")


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (("jobs", "create", "--json", "-"), "", "--json: the input is empty; expected a JSON job "
     "document"),
    (("jobs", "create", "--json", "-"), "{nope", "--json: not valid JSON: line 1 column 2: "
     "Expecting property name enclosed in double quotes"),
    (("jobs", "create", "--json", "-"), '{"name": "a"}\n{oops}', "--json: not valid JSON on "
     "line 2 column 2: Expecting property name enclosed in double quotes"),
    (("jobs", "create", "--json", "/no/such/file.json"), None, "--json: cannot read "
     "/no/such/file.json: No such file or directory"),
    (("jobs", "create", "--json", "-"), json.dumps({**PY_JOB, "schedule": {"cron": "61 * * * *"}}),
     "schedule.cron: field 'minute' value 61 is out of range 0-59"),
    (("jobs", "create", "--json", "-"), json.dumps([PY_JOB, {**PY_JOB, "priority": "high"}]),
     "[1].priority: must be an integer from -1000 to 1000 (got 'high')"),
    (("jobs", "create", "--json", "-"), json.dumps([PY_JOB, PY_JOB]),
     "a job named 'hello' already exists"),
    (("runs", "show", "hello", "yesterday"), None, None),
])
def test_bad_input_exits_2_with_one_line(tw: Any, args: tuple[str, ...], stdin: str | None,
                                         message: str | None) -> None:
    code, out, err = tw(*args, stdin=stdin)
    assert out == ""
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("tickwork: error: ")
    assert "Traceback" not in err
    if message is not None:
        assert err == f"tickwork: error: {message}\n"


def test_a_failed_bulk_create_stores_nothing(tw: Any) -> None:
    docs = [{**PY_JOB, "name": "first"}, {**PY_JOB, "name": "first"}]
    assert tw("jobs", "create", "--json", "-", stdin=json.dumps(docs))[0] == 2
    assert json.loads(tw("jobs", "list", "--json")[1]) == []


def test_unknown_setting_in_the_environment_is_an_error(tw: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWORK_DATABSE_URL", "sqlite:///x.db")
    code, _, err = tw("jobs", "list")
    assert code == 2
    assert "TICKWORK_DATABSE_URL" in err


def test_postgres_url_migrates_creates_and_lists(tw: Any) -> None:
    from tickwork.testing.postgres import scratch_database

    with scratch_database() as url:
        code, out, err = tw("migrate", "--database", url)
        assert (code, out) == (0, f"database {url} is up to date\n"), err
        docs = [{**PY_JOB, "name": f"pg-{i}"} for i in range(3)]
        code, out, err = tw("jobs", "create", "--json", "-", "--database", url,
                            stdin=json.dumps(docs))
        assert (code, out) == (0, "created 3 jobs\n"), err
        code, out, _ = tw("jobs", "list", "--json", "--database", url)
        assert [j["name"] for j in json.loads(out)] == ["pg-0", "pg-1", "pg-2"]
    code, _, err = tw("jobs", "list", "--database", "postgresql://u:hunter2@127.0.0.1:1/x")
    assert code == 1
    assert "cannot connect" in err
    assert "hunter2" not in err
