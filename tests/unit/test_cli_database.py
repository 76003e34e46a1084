"""Commands that only read (or change what exists) never create or migrate the database, and
listings page through the store's batch bound so --limit N gives N rows."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork.cli.main import main
from tickwork.client import AsyncClient
from tickwork.testing.postgres import scratch_database

READ_ONLY = [
    ("jobs", "list"), ("jobs", "show", "x"), ("jobs", "pause", "x"), ("jobs", "resume", "x"),
    ("jobs", "trigger", "x"), ("jobs", "delete", "x"), ("runs", "list"),
    ("runs", "show", "x", "2030-01-01T00:00:00Z"), ("tokens", "list"), ("tokens", "revoke", "x"),
    ("secrets", "list"), ("secrets", "delete", "x"),
]
JOB = {"name": "hello", "schedule": {"every": "10s"}, "kind": "python",
       "payload": {"callable": "tickwork.cli.demo:tick"}}


@pytest.fixture
def tw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    for key in [k for k in __import__("os").environ if k.startswith("TICKWORK_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)

    def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", __import__("io").StringIO(stdin))
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_a_missing_sqlite_file_is_reported_and_not_created(tw: Any, tmp_path: Path,
                                                           args: tuple[str, ...]) -> None:
    url = f"sqlite:///{tmp_path}/sub/missing.db"
    code, out, err = tw(*args, "--database", url)
    assert (code, out) == (2, "")
    assert err == (f"tickwork: error: database {url} does not exist or is not migrated to this "
                   "version of tickwork; run `tickwork migrate` first\n")
    assert list(tmp_path.iterdir()) == []  # no file, no folder, no -wal


def test_an_empty_sqlite_file_is_not_migrated(tw: Any, tmp_path: Path) -> None:
    (tmp_path / "empty.db").write_bytes(b"")
    code, _, err = tw("jobs", "list", "--database", f"sqlite:///{tmp_path}/empty.db")
    assert code == 2
    assert "run `tickwork migrate` first" in err
    assert (tmp_path / "empty.db").read_bytes() == b""


def test_an_empty_postgres_database_is_reported_and_left_empty(tw: Any) -> None:
    with scratch_database() as url:
        for args in (("jobs", "list"), ("runs", "list"), ("tokens", "list")):
            code, _, err = tw(*args, "--database", url)
            assert code == 2
            assert err.endswith("does not exist or is not migrated to this version of "
                                "tickwork; run `tickwork migrate` first\n")
        with psycopg.connect(url) as conn:
            tables = conn.execute("SELECT count(*) FROM pg_tables "
                                  "WHERE schemaname = 'public'").fetchone()
        assert tables == (0,)
        assert tw("migrate", "--database", url)[0] == 0
        assert tw("jobs", "list", "--database", url)[0] == 0


def test_creating_commands_still_create_the_database(tw: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    code, _, err = tw("jobs", "create", "--json", "-", "--database", url, stdin=json.dumps(JOB))
    assert code == 0, err
    _, out, _ = tw("jobs", "list", "--json", "--database", url)
    assert [j["name"] for j in json.loads(out)] == ["hello"]


def test_listings_page_past_the_store_batch_bound(tw: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/many.db"
    docs = [{**JOB, "name": f"job-{i:04d}", "schedule": {"every": "1s"}} for i in range(1203)]
    start = datetime(2020, 1, 1, tzinfo=UTC)

    async def fill() -> None:
        async with await AsyncClient.open(url) as client:
            await client.create_jobs(docs)
            for first, last in ((0, 1000), (1000, 1300)):  # a backfill takes 1,000 at most
                await client.backfill("job-0000", start + timedelta(seconds=first),
                                      start + timedelta(seconds=last))

    asyncio.run(fill())
    _, out, _ = tw("jobs", "list", "--json", "--limit", "1202", "--database", url)
    assert [j["name"] for j in json.loads(out)] == [d["name"] for d in docs[:1202]]
    _, out, _ = tw("jobs", "list", "--json", "--limit", "5000", "--database", url)
    assert len(json.loads(out)) == 1203

    _, out, _ = tw("runs", "list", "--json", "--limit", "1250", "--database", url)
    runs = [r["scheduled_at"] for r in json.loads(out)]
    assert len(runs) == len(set(runs)) == 1250
    assert runs == sorted(runs, reverse=True)
    assert runs[-1] == "2020-01-01T00:00:50Z"
    _, out, _ = tw("runs", "list", "--json", "--limit", "5000", "--oldest-first",
                      "--database", url)
    runs = [r["scheduled_at"] for r in json.loads(out)]
    assert (len(runs), runs[0], runs[-1]) == (1300, "2020-01-01T00:00:00Z",
                                              "2020-01-01T00:21:39Z")


@pytest.mark.parametrize("command", ["jobs", "runs"])
def test_a_limit_below_one_is_refused(tw: Any, tmp_path: Path, command: str) -> None:
    code, out, err = tw(command, "list", "--limit", "0",
                        "--database", f"sqlite:///{tmp_path}/x.db")
    assert (code, out, err) == (2, "", "tickwork: error: --limit: must be at least 1 (got 0)\n")
