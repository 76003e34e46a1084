"""``tickwork jobs sync``: the jobs declared in code brought into a store, on a database and
through ``--api``; a dry run changes nothing; a changed declaration updates its job."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from test_cli_api import api, tw  # noqa: F401  (the fixtures)

FIRST = '''import tickwork


@tickwork.job(every="1h", name="{prefix}-a")
def a() -> str:
    return "a"


@tickwork.job(cron="0 3 * * *", name="{prefix}-b", tags=["night"])
def b() -> str:
    return "b"
'''
CHANGED = '''import tickwork


@tickwork.job(every="2h", name="{prefix}-a")
def a() -> str:
    return "a"
'''


def project(root: Path, source: str, prefix: str) -> str:
    """A module in the working directory declaring jobs; returns its name."""
    name = f"declared_{uuid.uuid4().hex[:8]}"
    (root / f"{name}.py").write_text(source.format(prefix=prefix))
    return name


def synced(tw: Any, module: str, *where: str, dry_run: bool = False) -> dict[str, Any]:  # noqa: F811
    code, out, err = tw("jobs", "sync", "--import", module, "--json", *where,
                        *(("--dry-run",) if dry_run else ()))
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def schedules(tw: Any, *where: str) -> dict[str, Any]:  # noqa: F811
    code, out, err = tw("jobs", "list", "--json", *where)
    assert code == 0, err
    return {j["name"]: j["schedule"] for j in json.loads(out)}


def test_sync_on_a_database_and_through_the_api(
        tw: Any, tmp_path: Path, api: tuple[str, dict[str, str]],  # noqa: F811
) -> None:
    local = f"sqlite:///{tmp_path}/local.db"
    url, tokens = api
    for mode, where in (("database", ("--database", local)),
                        ("api", ("--api", url, "--token", tokens["write"]))):
        prefix = f"sync-{mode}"
        a, b = f"{prefix}-a", f"{prefix}-b"
        first = project(tmp_path, FIRST, prefix)
        dry = synced(tw, first, *where, dry_run=True)
        assert (dry["created"], dry["dry_run"]) == ([a, b], True), mode
        if mode == "api":
            assert schedules(tw, *where) == {}
        assert synced(tw, first, *where)["created"] == [a, b]
        assert synced(tw, first, *where)["unchanged"] == [a, b]
        assert schedules(tw, *where)[a] == {"every": 3600, "offset": 0}
        changed = project(tmp_path, CHANGED, prefix)
        assert synced(tw, changed, *where, dry_run=True)["updated"] == [a]
        assert schedules(tw, *where)[a] == {"every": 3600, "offset": 0}
        again = synced(tw, changed, *where)
        assert (again["updated"], again["unchanged"]) == ([a], [])
        assert schedules(tw, *where)[a] == {"every": 7200, "offset": 0}
        assert b in schedules(tw, *where)  # no longer declared: left as it is


def test_a_module_without_jobs_or_that_cannot_import_is_one_line(
        tw: Any, tmp_path: Path) -> None:  # noqa: F811
    empty = project(tmp_path, "X = 1\n", "none")
    local = ("--database", f"sqlite:///{tmp_path}/t.db")
    code, out, err = tw("jobs", "sync", "--import", empty, *local)
    assert (code, out) == (2, "")
    assert err.strip() == f"tickwork: error: --import: no @tickwork.job functions in {empty}"
    code, _, err = tw("jobs", "sync", "--import", "no_such_module_here", *local)
    assert code == 2
    assert "cannot import no_such_module_here" in err
    assert "Traceback" not in err
