"""``tickwork jobs backfill``: the preview, the confirmation, the overlap choice, and one line
with status 2 for a bad time or range; the same on a database and through ``--api``."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_cli_api import api, normalised, tw  # noqa: F401  (the fixtures)

HOURLY = {"name": "hourly", "schedule": {"cron": "0 * * * *"}, "kind": "python",
          "payload": {"callable": "tickwork.cli.demo:tick", "args": ["x"]}}
END = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
SPAN = ("--from", (END - timedelta(hours=4)).isoformat(), "--to", END.isoformat())
FUTURE = (END + timedelta(days=2)).isoformat()


class Terminal(io.StringIO):
    """Standard input a person types on."""

    def isatty(self) -> bool:
        return True


SESSION: list[tuple[str, ...]] = [
    ("jobs", "pause", "hourly"),  # nothing runs: what the runs list shows stays put
    ("jobs", "backfill", "hourly", "--from", SPAN[1],
     "--to", (END - timedelta(hours=2)).isoformat(), "--yes"),
    ("jobs", "backfill", "hourly", *SPAN, "--dry-run"),
    ("jobs", "backfill", "hourly", *SPAN, "--dry-run", "--json"),
    ("jobs", "backfill", "hourly", *SPAN, "--overlap", "allow_all", "--yes", "--json"),
    ("runs", "list", "--job", "hourly", "--json", "--oldest-first"),
]
BAD: list[tuple[str, ...]] = [
    ("jobs", "backfill", "hourly", "--from", SPAN[3], "--to", SPAN[1], "--yes"),
    ("jobs", "backfill", "hourly", "--from", "yesterday", "--to", SPAN[3], "--yes"),
    ("jobs", "backfill", "hourly", "--from", SPAN[1], "--to", "2030-01-01", "--yes"),
    ("jobs", "backfill", "hourly", "--from", SPAN[1], "--to", FUTURE, "--yes"),
    ("jobs", "backfill", "hourly", *SPAN, "--overlap", "sometimes", "--yes"),
    ("jobs", "backfill", "hourly", *SPAN, "--limit", "2", "--yes"),
    ("jobs", "backfill", "hourly", *SPAN),  # not a terminal, no --yes
    ("jobs", "backfill", "nosuch", *SPAN, "--yes"),
]


def test_the_same_on_a_database_and_through_the_api(
        tw: Any, tmp_path: Path, api: tuple[str, dict[str, str]],  # noqa: F811
) -> None:
    local = f"sqlite:///{tmp_path}/local.db"
    assert tw("migrate", "--database", local)[0] == 0
    url, tokens = api
    seen: dict[str, list[tuple[int, str, str]]] = {}
    for mode, extra in (("database", ("--database", local)),
                        ("api", ("--api", url, "--token", tokens["write"]))):
        created = tw("jobs", "create", "--json", "-", *extra, stdin=json.dumps(HOURLY))
        assert created[0] == 0, created
        seen[mode] = [(code, normalised(out), normalised(err))
                      for code, out, err in (tw(*args, *extra) for args in SESSION + BAD)]
    assert seen["api"] == seen["database"]
    outcomes = seen["api"]
    assert [code for code, _, _ in outcomes] == [0] * len(SESSION) + [2] * len(BAD)
    for _, out, err in outcomes[len(SESSION):]:
        assert (out, err.count("\n"), err.startswith("tickwork: error: ")) == ("", 1, True)
    _, first, _ = outcomes[1]
    assert first.startswith("backfilled hourly: created 2 runs; overlap skip (the job's own)")
    _, preview, _ = outcomes[2]
    assert "4 fire times, 2 new, 2 with a run already" in preview
    assert "warning: the 2 new runs are all due now, so under skip" in preview
    assert [line.split()[-1] for line in preview.splitlines()[-4:]] == [
        "exists", "exists", "new", "new"]
    _, shown, _ = outcomes[3]
    body = json.loads(shown.replace("<time>", "2030-01-01T00:00:00Z"))
    assert (body["dry_run"], body["count"], body["new"], body["created"], body["items"]) == (
        True, 4, 2, 0, [])
    _, done, _ = outcomes[4]
    body = json.loads(done.replace("<time>", "2030-01-01T00:00:00Z"))
    assert (body["created"], body["overlap"], body["overlap_source"]) == (
        2, "allow_all", "backfill")
    _, runs, _ = outcomes[5]
    assert [r["overlap"] for r in json.loads(runs)] == [None, None, "allow_all", "allow_all"]
    assert "--to: must be after --from" in outcomes[len(SESSION)][2]
    assert "--to: must not be in the future" in outcomes[len(SESSION) + 3][2]
    assert "--yes: standard input is not a terminal" in outcomes[len(SESSION) + 6][2]


@pytest.mark.parametrize(("answer", "status", "runs"), [("y\n", 0, 4), ("n\n", 1, 0)])
def test_on_a_terminal_it_asks_first(
        tw: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        capsys: pytest.CaptureFixture[str], answer: str, status: int, runs: int) -> None:
    db = ("--database", f"sqlite:///{tmp_path}/t.db")
    assert tw("jobs", "create", "--json", "-", *db, stdin=json.dumps(HOURLY))[0] == 0
    assert tw("jobs", "pause", "hourly", *db)[0] == 0
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    from tickwork.cli.main import main  # here: tw would put a plain stdin back

    assert main(["jobs", "backfill", "hourly", *SPAN, *db]) == status
    out, err = capsys.readouterr()
    assert "4 fire times, 4 new" in err
    assert "create 4 runs? [y/N]" in err
    assert ("backfilled hourly: created 4 runs" in out) == (status == 0)
    listed = json.loads(tw("runs", "list", "--job", "hourly", "--json", *db)[1])
    assert len(listed) == runs
