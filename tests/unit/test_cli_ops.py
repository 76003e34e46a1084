"""Run control, the audit trail, alerts, a deleted job's runs and the queues' pause switch on
the command line: on a SQLite file and through the REST API (the same lines either way), with
the actor each way names."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_cli_api import ApiThread, normalised, tw  # noqa: F401  (tw: the fixture)

from tickwork.client import AsyncClient
from tickwork.drivers.alerts import AlertFireParams, AlertResolveParams, NewDelivery
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.models import OccurrenceState
from tickwork.testing.factories import claim
from tickwork.testing.harness import START, make_harness

JOB = {"name": "hello", "schedule": {"at": "2099-01-01T00:00:00Z"}, "kind": "http",
       "payload": {"url": "https://example.org/"}}


def recorder(name: str, path: Path, **chains: list[str]) -> dict[str, Any]:
    return {"name": name, "schedule": {"at": "2099-01-01T00:00:00Z"}, "kind": "python",
            "retry": {"max_attempts": 1},
            "payload": {"callable": "tickwork.testing.ledger:record",
                        "kwargs": {"path": str(path)}}, **chains}


def test_cancel_and_retry_name_the_os_user_and_refuse_what_they_cannot_do(
        tw: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("LOGNAME", "alice")
    db = ("--database", f"sqlite:///{tmp_path}/ops.db")
    assert tw("migrate", *db)[0] == 0
    assert tw("jobs", "create", "--json", "-", *db, stdin=json.dumps(JOB))[0] == 0
    at = json.loads(tw("jobs", "trigger", "hello", "--json", *db)[1])["scheduled_at"]
    assert tw("runs", "cancel", "hello", at, *db) == (
        0, f"cancelled run hello @ {at} (cancelled by alice)\n", "")
    assert tw("runs", "cancel", "hello", at, *db) == (
        2, "", "tickwork: error: the run is cancelled: only a waiting or running run can be "
        "cancelled\n")
    code, out, _ = tw("runs", "retry", "hello", at, "--json", *db)
    assert (code, json.loads(out)["state"]) == (0, "retrying")
    code, out, err = tw("runs", "retry", "hello", at, *db)
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert "only a dead, crashed or cancelled run can be retried" in err
    assert tw("runs", "cancel", "hello", "soon", *db)[0] == 2
    monkeypatch.setenv("LOGNAME", "bob")
    assert tw("jobs", "pause", "hello", *db)[0] == 0
    shown = json.loads(tw("jobs", "show", "hello", "--json", *db)[1])
    assert (shown["created_by"], shown["updated_by"]) == ("alice", "bob")
    text = tw("jobs", "show", "hello", *db)[1]
    assert " by alice\n" in text
    assert " by bob\n" in text
    audit = json.loads(tw("jobs", "audit", "hello", "--json", *db)[1])
    assert [(e["action"], e["actor"]) for e in audit] == [
        ("create", "alice"), ("trigger", "alice"), ("cancel", "alice"), ("retry", "alice"),
        ("pause", "bob")]
    assert [e["id"] for e in json.loads(tw("audit", "list", "--after", str(audit[2]["id"]),
                                           "--limit", "1", "--json", *db)[1])] == [audit[3]["id"]]
    lines = tw("audit", "list", *db)[1].splitlines()
    assert lines[0].split() == ["ID", "AT", "ACTOR", "ACTION", "JOB", "RUN", "DETAILS"]
    assert len(lines) == 6


def prepared(tmp_path: Path) -> tuple[str, str]:
    """A SQLite file with a chained run (extract -> load) and a firing and a resolved alert;
    the chained run's scheduled_at."""
    path = tmp_path / "ledger.jsonl"

    async def go() -> str:
        async with make_harness(tmp_path) as h:
            await h.client.create_jobs([recorder("extract", path, on_success=["load"]),
                                        recorder("load", path)])
            await h.client.trigger_job("extract")
            await h.completed()
            chained = await h.completed()
            assert chained.state is OccurrenceState.SUCCEEDED
            [run] = await h.client.list_runs(job="load")
            load = await h.client.get_job("load")
            for condition, detail in (("failed", "the run ended dead"),
                                      ("late_start", "a run is late")):
                await h.store.alert_fire(AlertFireParams(
                    job_id=load.id, job_name="load", condition=condition, detail=detail,
                    now=START, cooldown_seconds=0,
                    deliveries=[NewDelivery(channel=0, kind="slack", payload="{}")]))
            await h.store.alert_resolve(AlertResolveParams(
                job_id=load.id, condition="late_start", detail="none is late", now=START))
            return str(run.scheduled_at.isoformat().replace("+00:00", "Z"))

    return f"sqlite:///{tmp_path}/tickwork.db", asyncio.run(go())


COMMANDS = [
    ("runs", "show", "load", "{run}"),
    ("runs", "show", "load", "{run}", "--json"),
    ("alerts", "list"),
    ("alerts", "list", "--json"),
    ("alerts", "list", "--state", "firing"),
    ("alerts", "list", "--job", "extract", "--json"),
    ("alerts", "list", "--job", "load", "--state", "resolved", "--limit", "1", "--json"),
    ("jobs", "audit", "load"),
    ("audit", "list", "--since", "2000-01-01T00:00:00Z", "--json"),
]


def test_upstream_and_alerts_read_alike_on_the_database_and_through_the_api(
        tw: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    url, at = prepared(tmp_path)
    code, out, err = tw("tokens", "create", "--name", "ci-bot", "--scope", "write",
                        "--database", url)
    assert code == 0, err
    token = out.splitlines()[-1]
    seen: dict[str, list[tuple[int, str, str]]] = {}
    with ApiThread(url) as server:
        for mode, extra in (("database", ("--database", url)),
                            ("api", ("--api", server.url, "--token", token))):
            seen[mode] = [tw(*(at if a == "{run}" else a for a in args), *extra)
                          for args in COMMANDS]
        # through the API, who acts is the token's name
        monkeypatch.setenv("LOGNAME", "alice")
        assert tw("runs", "retry", "load", at, "--api", server.url, "--token", token)[0] == 2
        run = json.loads(tw("jobs", "trigger", "load", "--json", "--database", url)[1])
        assert tw("runs", "cancel", "load", run["scheduled_at"], "--api", server.url,
                  "--token", token)[1].endswith("(cancelled by ci-bot)\n")
    for args, there, here in zip(COMMANDS, seen["database"], seen["api"], strict=True):
        assert here == there, " ".join(args)
        assert here[0] == 0, here
    shown = seen["database"][0][1]
    assert f"\ntriggered by extract @ {at}, attempt 1 (success; key " in shown
    upstream = json.loads(seen["database"][1][1])["upstream"]
    assert (upstream["job_name"], upstream["event"], upstream["attempt"]) == (
        "extract", "success", 1)
    listed = json.loads(seen["database"][3][1])
    assert sorted((a["condition"], a["state"]) for a in listed) == [
        ("failed", "firing"), ("late_start", "resolved")]
    assert all("payload" not in d for a in listed for d in a["deliveries"])
    assert "slack#0" in seen["database"][2][1]
    firing = seen["database"][4][1].splitlines()
    assert len(firing) == 2
    assert "failed" in firing[1]
    assert json.loads(seen["database"][5][1]) == []
    assert [a["condition"] for a in json.loads(seen["database"][6][1])] == ["late_start"]
    assert normalised(seen["database"][7][1]).count("create") == 1


def test_a_deleted_jobs_runs_by_its_name_and_its_id(tw: Any, tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / "ledger.jsonl"

    async def go() -> str:
        async with make_harness(tmp_path) as h:
            job = await h.client.create_job(recorder("gone", path))
            await h.client.trigger_job("gone")
            assert (await h.completed()).state is OccurrenceState.SUCCEEDED
            h.clock.advance(60)
            await h.client.trigger_job("gone")  # waits: deleting the job cancels it
            await h.client.delete_job("gone")
            return job.id

    job_id = asyncio.run(go())
    url = f"sqlite:///{tmp_path}/tickwork.db"
    code, out, err = tw("tokens", "create", "--name", "ci-bot", "--scope", "read",
                        "--database", url)
    assert code == 0, err
    token = out.splitlines()[-1]
    with ApiThread(url) as server:
        for extra in (("--database", url), ("--api", server.url, "--token", token)):
            for ref in ("gone", job_id):
                code, out, err = tw("runs", "list", "--job", ref, "--json", *extra)
                assert code == 0, err
                runs = json.loads(out)
                assert [(r["job_id"], r["state"]) for r in runs] == [
                    (job_id, "cancelled"), (job_id, "succeeded")]
            code, out, _ = tw("runs", "list", "--job", "gone", *extra)
            assert code == 0
            assert len(out.splitlines()) == 3  # a header and the two runs
    assert tw("runs", "list", "--job", "never-was", "--database", url)[0] == 2


def test_queues_pause_and_resume(tw: Any, tmp_path: Path) -> None:  # noqa: F811
    url = f"sqlite:///{tmp_path}/q.db"
    assert tw("migrate", "--database", url)[0] == 0
    code, out, err = tw("tokens", "create", "--name", "ops", "--scope", "admin",
                        "--database", url)
    assert code == 0, err
    token = out.splitlines()[-1]
    assert tw("jobs", "create", "--json", "-", "--database", url,
              stdin=json.dumps({**JOB, "queue": "mail"}))[0] == 0
    assert tw("jobs", "trigger", "hello", "--database", url)[0] == 0

    def listed(*extra: str) -> dict[str, Any]:
        code, out, err = tw("queues", "list", "--json", *extra)
        assert code == 0, err
        return {q["name"]: q for q in json.loads(out)}

    async def store_says() -> tuple[bool, int]:
        """The store's pause switch, and how many runs of the queue a worker claims now."""
        store = SqliteStore(url)
        try:
            [mail] = [q for q in await AsyncClient(store).list_queues() if q.name == "mail"]
            now = datetime.now(UTC) + timedelta(seconds=1)
            return mail.paused, len((await claim(store, now, queue="mail")).claims)
        finally:
            await store.close()

    assert tw("queues", "pause", "mail", "--database", url) == (0, "paused queue mail\n", "")
    assert listed("--database", url)["mail"]["paused"] is True
    assert asyncio.run(store_says()) == (True, 0)
    with ApiThread(url) as server:
        api = ("--api", server.url, "--token", token)
        assert listed(*api)["mail"]["paused"] is True
        code, out, err = tw("queues", "resume", "mail", "--json", *api)
        assert (code, json.loads(out)["paused"]) == (0, False), err
    assert listed("--database", url)["mail"]["paused"] is False
    assert asyncio.run(store_says()) == (False, 1)  # claimed once resumed
