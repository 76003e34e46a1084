"""``tickwork enqueue`` on a database and through the REST API: one-off jobs without a name,
dedupe keys, and bad input as one line with exit status 2, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_api import ApiThread, new_database, tw  # noqa: F401  (fixture)

HOOK = json.dumps({"method": "POST", "url": "https://example.org/hook"})


def test_enqueue_on_a_database(tw: Any, tmp_path: Path) -> None:  # noqa: F811
    db = ("--database", f"sqlite:///{tmp_path}/e.db")
    code, out, err = tw("enqueue", "http", "--payload", HOOK, "--dedupe-key", "receipt-42",
                        "--dedupe-window", "10m", "--queue", "mail", *db)
    assert code == 0, err
    assert out.startswith("enqueued job http-")
    code, out, _ = tw("enqueue", "http", "--payload", HOOK, "--dedupe-key", "receipt-42",
                      "--json", *db)
    assert code == 0
    held = json.loads(out)
    assert held["created"] is False
    assert held["job"]["queue"] == "mail"
    payload_file = tmp_path / "p.json"
    payload_file.write_text(HOOK)
    code, out, _ = tw("enqueue", "http", "--payload", f"@{payload_file}", "--at",
                      "2030-01-01T09:00:00Z", "--retry", '{"max_attempts": 4}', "--json", *db)
    job = json.loads(out)["job"]
    assert (job["schedule"], job["retry"]["max_attempts"]) == (
        {"at": "2030-01-01T09:00:00Z"}, 4)
    code, out, _ = tw("jobs", "list", "--json", *db)
    assert len(json.loads(out)) == 2


def test_enqueue_many_from_requests(tw: Any, tmp_path: Path) -> None:  # noqa: F811
    db = ("--database", f"sqlite:///{tmp_path}/e.db")
    lines = "\n".join(json.dumps({"kind": "http", "payload": json.loads(HOOK),
                                  "dedupe_key": key}) for key in ("a", "a", "b"))
    code, out, err = tw("enqueue", "--requests", "-", "--json", *db, stdin=lines)
    assert code == 0, err
    assert [i["created"] for i in json.loads(out)] == [True, False, True]


@pytest.mark.parametrize(("args", "message"), [
    (("http", "--payload", HOOK, "--at", "soon"), "at: must be an RFC 3339"),
    (("http", "--payload", "[1]"), "--payload: must be a JSON object"),
    (("http", "--payload", "{"), "--payload: not valid JSON"),
    (("http", "--payload", "@/nonexistent/p.json"), "--payload: cannot read"),
    (("http", "--payload", HOOK, "--dedupe-window", "0"), "dedupe_window_seconds"),
    (("http", "--payload", '{"url": "ftp://example.org/"}'), "payload.url"),
    (("cron", "--payload", HOOK), "kind: must be one of"),
    ((), "KIND: is required"),
    (("http", "--payload", HOOK, "--requests", "-"), "--requests: give KIND"),
])
def test_bad_input_is_one_line_and_status_2(tw: Any, tmp_path: Path,  # noqa: F811
                                            args: tuple[str, ...], message: str) -> None:
    code, out, err = tw("enqueue", *args, "--database", f"sqlite:///{tmp_path}/e.db")
    assert code == 2, (out, err)
    assert message in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_enqueue_through_the_api(tw: Any, tmp_path: Path) -> None:  # noqa: F811
    url, tokens = new_database(tw, tmp_path / "served.db")
    with ApiThread(url) as server:
        remote = ("--api", server.url, "--token", tokens["write"])
        code, out, err = tw("enqueue", "http", "--payload", HOOK, "--dedupe-key", "k",
                            "--json", *remote)
        assert code == 0, err
        first = json.loads(out)
        code, out, err = tw("enqueue", "http", "--payload", HOOK, "--dedupe-key", "k",
                            *remote)
        assert code == 0, err
        assert out.startswith(f"dedupe key held by job {first['job']['name']}")
        code, _, err = tw("enqueue", "http", "--payload", HOOK, "--at", "x", *remote)
        assert code == 2
        assert "at: must be an RFC 3339" in err
        code, _, err = tw("enqueue", "http", "--payload", HOOK, "--api", server.url,
                          "--token", tokens["read"])
        assert code != 0
        assert "Traceback" not in err
