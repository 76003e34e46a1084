"""Queues and limit keys owned by one namespace, on SQLite and PostgreSQL: a token without a
namespace gives them out (and shares them again); a token of the owner pauses and limits them,
a shared one is 403 to it and another namespace's 404, absent from its listings; a job may
name a queue or ``limit_key`` its namespace owns or shares, never another's (422, worded as for
one that does not exist)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from test_api import assert_problem

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.cli.main import main
from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.document.limits import Limits
from tickwork.drivers import open_driver
from tickwork.drivers.limits import LimitOwners, Rate
from tickwork.drivers.postgres import store as postgres_store
from tickwork.drivers.sqlite import store as sqlite_store
from tickwork.errors import Forbidden, ValidationError
from tickwork.metrics import Metrics
from tickwork.testing import postgres as pg
from tickwork.testing.harness import START


def doc(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "http", "schedule": {"every": "1h"},
            "payload": {"url": "https://example.org/hook"}, **extra}


@dataclass
class Tenants:
    url: str
    client: AsyncClient
    http: httpx.AsyncClient
    tokens: dict[str, str]

    async def call(self, who: str, method: str, url: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return await self.http.request(method, url, headers=headers, **kw)

    async def ok(self, who: str, method: str, url: str, **kw: Any) -> Any:
        r = await self.call(who, method, url, **kw)
        assert r.status_code in (200, 201, 204), r.text
        return r.json() if r.status_code != 204 else None


@pytest.fixture(params=["sqlite", "postgres"])
async def t(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Tenants]:
    url = (f"sqlite:///{tmp_path}/tickwork.db" if request.param == "sqlite"
           else request.getfixturevalue("postgres_url"))
    client = await AsyncClient.open(url, clock=FakeClock(START))
    tokens = {}
    for who, scope, namespace in (("a", "admin", "a"), ("a-write", "write", "a"),
                                  ("b", "admin", "b"), ("root", "admin", None)):
        tokens[who] = (await create_token(client, who, scope, namespace))[0]
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(
        client, metrics=Metrics())), base_url="http://127.0.0.1:8000")
    yield Tenants(url=url, client=client, http=http, tokens=tokens)
    await http.aclose()
    await client.close()


async def owned(t: Tenants) -> None:
    """a-q and a-key are a's, b-q and b-key b's, shared-q and shared-key everyone's."""
    for name, owner in (("a-q", "a"), ("b-q", "b"), ("shared-q", None)):
        await t.ok("root", "PUT", f"/api/v1/queues/{name}/limits",
                   json={"max_running": 2, "namespace": owner})
    for key, owner in (("a-key", "a"), ("b-key", "b"), ("shared-key", None)):
        await t.ok("root", "PUT", f"/api/v1/limits/{key}", json={"rate": "5/s",
                                                                 "namespace": owner})


async def test_a_token_without_a_namespace_gives_out_and_shares_back(t: Tenants) -> None:
    put = await t.ok("root", "PUT", "/api/v1/queues/q/limits",
                     json={"max_running": 2, "namespace": "a"})
    assert (put["name"], put["namespace"], put["max_running"]) == ("q", "a", 2)
    kept = await t.ok("root", "PUT", "/api/v1/queues/q/limits", json={"rate": "1/s"})
    assert (kept["namespace"], kept["max_running"], kept["rate"]) == ("a", None, "1/s")
    shared = await t.ok("root", "PUT", "/api/v1/queues/q/limits", json={"namespace": None})
    assert shared["namespace"] is None
    key = await t.ok("root", "PUT", "/api/v1/limits/k", json={"rate": "1/s", "namespace": "b"})
    assert key["namespace"] == "b"
    listed = (await t.ok("root", "GET", "/api/v1/limits"))["items"]
    assert [(k["key"], k["namespace"]) for k in listed] == [("k", "b")]
    bad = assert_problem(await t.call("root", "PUT", "/api/v1/queues/q/limits",
                                      json={"namespace": "Not Valid"}), 422)
    assert bad["errors"][0]["field"] == "namespace"
    # The Python client: the same, with KEEP by default.
    info = await t.client.set_queue_limits("py", Limits(max_running=1), namespace="a")
    assert info.namespace == "a"
    assert (await t.client.set_queue_limits("py", Limits())).namespace == "a"
    limit = await t.client.set_limit("py-key", Limits(rate=Rate(1, 1.0)), namespace="b")
    assert limit.namespace == "b"
    assert (await t.client.set_limit("py-key", Limits(rate=Rate(2, 1.0)),
                                     namespace=None)).namespace is None


async def test_the_owner_pauses_and_limits_its_own_only(t: Tenants) -> None:
    await owned(t)
    paused = await t.ok("a", "POST", "/api/v1/queues/a-q/pause")
    assert (paused["paused"], paused["namespace"]) == (True, "a")
    assert not (await t.ok("a", "POST", "/api/v1/queues/a-q/resume"))["paused"]
    limited = await t.ok("a", "PUT", "/api/v1/queues/a-q/limits", json={"max_running": 7})
    assert (limited["max_running"], limited["namespace"]) == (7, "a")
    key = await t.ok("a", "PUT", "/api/v1/limits/a-key", json={"rate": "9/s"})
    assert (key["rate"], key["namespace"]) == ("9/s", "a")
    # Shared: read, not changed (403). Another namespace's: not there (404, never named).
    for method, url, body in (("POST", "/api/v1/queues/{}/pause", None),
                              ("POST", "/api/v1/queues/{}/resume", None),
                              ("PUT", "/api/v1/queues/{}/limits", {"max_running": 1})):
        assert_problem(await t.call("a", method, url.format("shared-q"), json=body), 403)
        gone = assert_problem(await t.call("a", method, url.format("b-q"), json=body), 404)
        assert gone["detail"] == "no queue 'b-q' in namespace 'a'"
    assert_problem(await t.call("a", "PUT", "/api/v1/limits/shared-key",
                                json={"rate": "1/s"}), 403)
    assert_problem(await t.call("a", "DELETE", "/api/v1/limits/shared-key"), 403)
    for method, body in (("PUT", {"rate": "1/s"}), ("DELETE", None)):
        gone = assert_problem(await t.call("a", method, "/api/v1/limits/b-key", json=body),
                              404)
        assert gone["detail"] == "no limit key 'b-key' in namespace 'a'"
    # Pausing needs admin as before; an owner gives nothing away.
    assert_problem(await t.call("a-write", "POST", "/api/v1/queues/a-q/pause"), 403)
    for owner in ("b", None):
        assert_problem(await t.call("a", "PUT", "/api/v1/queues/a-q/limits",
                                    json={"namespace": owner}), 403)
        assert_problem(await t.call("a", "PUT", "/api/v1/limits/a-key",
                                    json={"rate": "1/s", "namespace": owner}), 403)
    assert (await t.ok("a", "PUT", "/api/v1/queues/a-q/limits",
                       json={"namespace": "a"}))["namespace"] == "a"
    await t.ok("a", "DELETE", "/api/v1/limits/a-key")
    queues = {q["name"]: q for q in (await t.ok("root", "GET", "/api/v1/queues"))["items"]}
    assert (queues["b-q"]["paused"], queues["b-q"]["max_running"]) == (False, 2)
    assert (queues["shared-q"]["paused"], queues["shared-q"]["max_running"]) == (False, 2)
    keys = {k["key"]: k for k in (await t.ok("root", "GET", "/api/v1/limits"))["items"]}
    assert sorted(keys) == ["b-key", "shared-key"]
    assert keys["b-key"]["rate"] == "5/s"


async def test_listings_leave_out_what_another_namespace_owns(t: Tenants) -> None:
    await owned(t)
    for who, queues, keys in (("a", ["a-q", "shared-q"], ["a-key", "shared-key"]),
                              ("b", ["b-q", "shared-q"], ["b-key", "shared-key"]),
                              ("root", ["a-q", "b-q", "shared-q"],
                               ["a-key", "b-key", "shared-key"])):
        listed = (await t.ok(who, "GET", "/api/v1/queues"))["items"]
        assert [q["name"] for q in listed] == queues, who
        assert [k["key"] for k in (await t.ok(who, "GET", "/api/v1/limits"))["items"]] == keys
    # ?namespace= narrows a token of every namespace the same way, and is ignored for a's.
    narrowed = (await t.ok("root", "GET", "/api/v1/queues?namespace=b"))["items"]
    assert [q["name"] for q in narrowed] == ["b-q", "shared-q"]
    ignored = (await t.ok("a", "GET", "/api/v1/limits?namespace=b"))["items"]
    assert [k["key"] for k in ignored] == ["a-key", "shared-key"]
    metrics = (await t.call("a", "GET", "/metrics")).text
    assert 'queue="a-q"' in metrics
    assert "b-q" not in metrics
    assert "b-key" not in metrics


async def test_a_job_names_its_own_or_shared_queues_and_keys_only(t: Tenants) -> None:
    await owned(t)
    for queue, key in (("a-q", "a-key"), ("shared-q", "shared-key"), ("default", None)):
        job = doc(f"ok-{queue}", queue=queue, **({"limit_key": key} if key else {}))
        await t.ok("a-write", "POST", "/api/v1/jobs", json=job)
    refusals = [
        ("POST", "/api/v1/jobs", doc("x", queue="b-q"), "queue",
         "no queue 'b-q' in namespace 'a'"),
        ("POST", "/api/v1/jobs", doc("x", limit_key="b-key"), "limit_key",
         "no limit key 'b-key' in namespace 'a'"),
        ("POST", "/api/v1/jobs", [doc("y"), doc("x", queue="b-q")], "[1].queue", None),
        ("PATCH", "/api/v1/jobs/ok-a-q", {"queue": "b-q"}, "queue", None),
        ("PATCH", "/api/v1/jobs/ok-a-q", {"limit_key": "b-key"}, "limit_key", None),
        ("POST", "/api/v1/enqueue", {"kind": "http", "queue": "b-q",
                                     "payload": {"url": "https://example.org/x"}},
         "queue", None),
    ]
    for method, url, body, field, detail in refusals:
        problem = assert_problem(await t.call("a-write", method, url, json=body), 422)
        assert problem["errors"][0]["field"] == field, (url, problem)
        assert "owned" not in problem["detail"]
        assert "'b'" not in problem["detail"]
        if detail is not None:
            assert problem["errors"][0]["message"] == detail
    names = [j["name"] for j in (await t.ok("a", "GET", "/api/v1/jobs"))["items"]]
    assert names == ["ok-a-q", "ok-default", "ok-shared-q"]
    assert (await t.ok("a", "GET", "/api/v1/jobs/ok-a-q"))["queue"] == "a-q"
    # b's own jobs may name them; one of every namespace creates in b with ?namespace=b.
    await t.ok("b", "POST", "/api/v1/jobs", json=doc("theirs", queue="b-q",
                                                     limit_key="b-key"))
    await t.ok("root", "POST", "/api/v1/jobs?namespace=b", json=doc("root-made",
                                                                   queue="b-q"))
    problem = assert_problem(await t.call("root", "POST", "/api/v1/jobs",
                                          json=doc("in-default", queue="b-q")), 422)
    assert problem["errors"][0]["message"] == "no queue 'b-q' in namespace 'default'"


async def test_a_client_of_one_namespace_obeys_the_same_rules(t: Tenants) -> None:
    await owned(t)
    a = t.client.scoped("a")
    assert (await a.pause_queue("a-q")).paused
    with pytest.raises(Forbidden):
        await a.pause_queue("shared-q")
    with pytest.raises(LookupError, match="no queue 'b-q' in namespace 'a'"):
        await a.set_queue_limits("b-q", Limits(max_running=1))
    with pytest.raises(ValidationError) as caught:
        await a.create_job(doc("x", limit_key="b-key"))
    assert caught.value.field == "limit_key"
    assert [q.name for q in await a.list_queues()] == ["a-q", "shared-q"]


def cli(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> str:
    assert main(list(args)) == code, capsys.readouterr()
    out, err = capsys.readouterr()
    return out if code == 0 else err


def owners(capsys: pytest.CaptureFixture[str], *db: str) -> tuple[dict[str, Any], ...]:
    return tuple({i.get("name", i.get("key")): i["namespace"]
                  for i in json.loads(cli(capsys, what, "list", "--json", *db))}
                 for what in ("queues", "limits"))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_cli_gives_out_and_shares_back(backend: str, tmp_path: Path,
                                           request: pytest.FixtureRequest,
                                           capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url = (f"sqlite:///{tmp_path}/tickwork.db" if backend == "sqlite"
           else request.getfixturevalue("postgres_url"))
    db = ("--database", url)
    cli(capsys, "migrate", *db)
    out = cli(capsys, "queues", "set", "acme-q", "--max-running", "2", "--namespace", "acme",
              *db)
    assert out.strip() == "queue acme-q: max running 2 (namespace acme)"
    out = cli(capsys, "limits", "set", "acme-key", "--rate", "3/s", "--namespace", "acme", *db)
    assert out.strip() == "limit acme-key: 3/s burst 3 (namespace acme)"
    listed = cli(capsys, "queues", "list", *db).splitlines()
    assert listed[0].split()[-1] == "NAMESPACE"
    assert listed[1].split()[0] == "acme-q"
    assert listed[1].split()[-1] == "acme"
    assert owners(capsys, *db) == ({"acme-q": "acme"}, {"acme-key": "acme"})
    # TICKWORK_NAMESPACE is not an owner: the owner stays.
    monkeypatch.setenv("TICKWORK_NAMESPACE", "globex")
    cli(capsys, "queues", "set", "acme-q", "--max-running", "3", *db)
    monkeypatch.delenv("TICKWORK_NAMESPACE")
    assert owners(capsys, *db) == ({"acme-q": "acme"}, {"acme-key": "acme"})
    # Narrowed to another namespace, the listings leave them out.
    assert owners(capsys, *db, "--namespace", "globex") == ({}, {})
    cli(capsys, "queues", "set", "acme-q", "--shared", *db)
    cli(capsys, "limits", "set", "acme-key", "--rate", "3/s", "--shared", *db)
    assert owners(capsys, *db) == ({"acme-q": None}, {"acme-key": None})
    err = cli(capsys, "queues", "set", "q", "--namespace", "a", "--shared", *db, code=2)
    assert "--namespace or --shared" in err
    err = cli(capsys, "limits", "set", "k", "--rate", "1/s", "--namespace", "Bad Name", *db,
              code=2)
    assert "--namespace" in err
    assert "Traceback" not in err
    # A client of one namespace on the database: a shared queue is not its to pause.
    err = cli(capsys, "queues", "pause", "acme-q", "--namespace", "acme", *db, code=2)
    assert "shared by every namespace" in err


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_what_was_there_before_owners_stays_shared_and_in_default(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database migrated up to the version before owners keeps its queues and keys shared,
    and the versions commands recorded become ``default``'s, once migrated on."""
    module: Any = sqlite_store if backend == "sqlite" else postgres_store
    last = 15 if backend == "sqlite" else 14
    every = module.MIGRATIONS
    monkeypatch.setattr(module, "MIGRATIONS", [m for m in every if m[0] < last])
    with contextlib.ExitStack() as stack:
        url = (f"sqlite:///{tmp_path}/old.db" if backend == "sqlite"
               else stack.enter_context(pg.scratch_database()))
        driver = open_driver(url)
        try:
            await driver.migrate()
            rows = ("INSERT INTO job_versions (name, version, updated_at) "
                    "VALUES ('report', 7, {t})",
                    "INSERT INTO queues (name, paused, updated_at, max_running) "
                    "VALUES ('payments', {f}, {t}, 3)",
                    "INSERT INTO limit_keys (key, rate_count, rate_seconds, burst, updated_at) "
                    "VALUES ('api', 5, 1, 5, {t})")
            if backend == "sqlite":
                with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
                    for row in rows:
                        conn.execute(row.format(t=0, f=0))
            else:
                async with await psycopg.AsyncConnection.connect(url) as conn:
                    for row in rows:
                        await conn.execute(row.format(t="now()", f="false"))
            monkeypatch.setattr(module, "MIGRATIONS", every)
            assert await driver.store.migrations_pending() == [
                version for version, _, _ in every if version >= last]
            await driver.migrate()
            assert await driver.store.job_version_get("report") == 7
            assert await driver.store.job_version_get("report", "acme") is None
            client = AsyncClient(driver.store, clock=FakeClock(START))
            assert await client.admin.limit_owners() == LimitOwners()
            acme = client.scoped("acme")
            assert [(q.name, q.namespace, q.max_running) for q in await acme.list_queues()] \
                == [("payments", None, 3)]
            assert [(k.key, k.namespace) for k in await acme.list_limits()] == [("api", None)]
            await acme.create_job(doc("uses-them", queue="payments", limit_key="api"))
        finally:
            await driver.close()
