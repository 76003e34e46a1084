"""A token of one namespace sees and changes only that namespace: another namespace's jobs and
runs are 404 (never 403: their existence is not revealed), listings never show them, tokens
are made only for its own namespace, and quotas hold on every path (one job, bulk, the Python
client, the CLI, a query parameter naming another namespace)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_api import assert_problem

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.cli.main import main
from tickwork.client import AsyncClient, Client
from tickwork.clock import FakeClock
from tickwork.drivers.alerts import AlertFireParams
from tickwork.drivers.base import OccurrenceClaimParams
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import QuotaExceeded
from tickwork.metrics import Metrics
from tickwork.testing.harness import START


def doc(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "http", "schedule": {"every": "1h"},
            "payload": {"url": "https://example.org/hook"}, **extra}


@dataclass
class Tenants:
    http: httpx.AsyncClient
    client: AsyncClient
    clock: FakeClock
    tokens: dict[str, str]

    async def call(self, who: str, method: str, url: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return await self.http.request(method, url, headers=headers, **kw)


@pytest.fixture
async def t(tmp_path: Path) -> AsyncIterator[Tenants]:
    store = SqliteStore(f"sqlite:///{tmp_path}/ns.db")
    await store.migrate()
    clock = FakeClock(START)
    client = AsyncClient(store, clock=clock)
    tokens = {}
    for who, scope, namespace in (("a", "write", "a"), ("a-admin", "admin", "a"),
                                  ("b", "write", "b"), ("b-read", "read", "b"),
                                  ("root", "admin", None)):
        tokens[who] = (await create_token(client.scoped(None), who, scope, namespace))[0]
    app = create_app(client, metrics=Metrics())
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://127.0.0.1:8000")
    yield Tenants(http=http, client=client, clock=clock, tokens=tokens)
    await http.aclose()
    await store.close()


async def b_job_with_a_run(t: Tenants) -> tuple[dict[str, Any], str]:
    job = (await t.call("b", "POST", "/api/v1/jobs", json=doc("secret"))).json()
    run = await t.call("b", "POST", "/api/v1/jobs/secret/trigger")
    assert run.status_code == 201, run.text
    return job, run.json()["scheduled_at"]


async def test_another_namespaces_job_is_404_by_id_and_by_name(t: Tenants) -> None:
    job, at = await b_job_with_a_run(t)
    t.clock.advance(10)
    window = {"from": (START - timedelta(hours=3)).isoformat(),
              "to": (START - timedelta(hours=1)).isoformat()}
    for ref in (job["id"], "secret"):
        for method, url, body in (
            ("GET", f"/api/v1/jobs/{ref}", None),
            ("PATCH", f"/api/v1/jobs/{ref}", {"priority": 9}),
            ("POST", f"/api/v1/jobs/{ref}/pause", None),
            ("POST", f"/api/v1/jobs/{ref}/resume", None),
            ("POST", f"/api/v1/jobs/{ref}/trigger", None),
            ("POST", f"/api/v1/jobs/{ref}/backfill", window),
            ("GET", f"/api/v1/jobs/{ref}/preview", None),
            ("GET", f"/api/v1/jobs/{ref}/status", None),
            ("GET", f"/api/v1/jobs/{ref}/audit", None),
            ("GET", f"/api/v1/jobs/{ref}/runs/{at}", None),
            ("POST", f"/api/v1/jobs/{ref}/runs/{at}/cancel", None),
            ("POST", f"/api/v1/jobs/{ref}/runs/{at}/retry", None),
            ("GET", f"/api/v1/runs?job={ref}", None),
            ("DELETE", f"/api/v1/jobs/{ref}", None),
        ):
            r = await t.call("a", method, url, json=body)
            assert_problem(r, 404)
            assert job["id"] not in r.text or ref == job["id"]  # nothing of the job leaks
    # B's job and run are as they were.
    after = (await t.call("b", "GET", "/api/v1/jobs/secret")).json()
    assert (after["priority"], after["paused"]) == (job["priority"], False)
    run = (await t.call("b", "GET", f"/api/v1/jobs/secret/runs/{at}")).json()
    assert run["run"]["state"] != "cancelled"
    runs = (await t.call("b", "GET", "/api/v1/runs?job=secret")).json()["items"]
    assert len(runs) == 1  # no trigger or backfill of A's added one


async def test_the_same_name_in_two_namespaces_is_two_jobs(t: Tenants) -> None:
    a = await t.call("a", "POST", "/api/v1/jobs", json=doc("report"))
    b = await t.call("b", "POST", "/api/v1/jobs", json=doc("report"))
    assert (a.status_code, b.status_code) == (201, 201)
    assert (a.json()["namespace"], b.json()["namespace"]) == ("a", "b")
    assert (await t.call("a", "DELETE", "/api/v1/jobs/report")).status_code == 204
    assert (await t.call("b", "GET", "/api/v1/jobs/report")).json()["id"] == b.json()["id"]
    # A's deleted job's history stays A's: B's token does not reach it by its id.
    assert_problem(await t.call("b", "GET", f"/api/v1/runs?job={a.json()['id']}"), 404)


async def test_listings_never_show_another_namespace(t: Tenants) -> None:
    await b_job_with_a_run(t)
    await t.call("a", "POST", "/api/v1/jobs", json=doc("mine"))
    await t.call("a", "POST", "/api/v1/jobs/mine/trigger")
    jobs = (await t.call("a", "GET", "/api/v1/jobs")).json()["items"]
    assert [j["name"] for j in jobs] == ["mine"]
    assert (await t.call("a", "GET", "/api/v1/jobs?name=secret")).json()["items"] == []
    runs = (await t.call("a", "GET", "/api/v1/runs")).json()["items"]
    assert {r["job_name"] for r in runs} == {"mine"}
    audit = (await t.call("a", "GET", "/api/v1/audit")).json()["items"]
    assert audit
    assert {e["job_name"] for e in audit} == {"mine"}
    spaces = (await t.call("a", "GET", "/api/v1/namespaces")).json()["items"]
    assert [n["name"] for n in spaces] == ["a"]
    tokens = (await t.call("a-admin", "GET", "/api/v1/tokens")).json()["items"]
    assert {tok["namespace"] for tok in tokens} == {"a"}
    # A query parameter naming another namespace changes nothing for a namespace's token.
    sneaky = (await t.call("a", "GET", "/api/v1/jobs?namespace=b")).json()["items"]
    assert [j["name"] for j in sneaky] == ["mine"]
    # An admin token without a namespace sees all, and filters by one.
    every = (await t.call("root", "GET", "/api/v1/jobs")).json()["items"]
    assert sorted(j["namespace"] for j in every) == ["a", "b"]
    only_b = (await t.call("root", "GET", "/api/v1/jobs?namespace=b")).json()["items"]
    assert [j["name"] for j in only_b] == ["secret"]


async def test_a_namespace_cannot_make_or_revoke_tokens_of_another(t: Tenants) -> None:
    r = await t.call("a-admin", "POST", "/api/v1/tokens",
                     json={"name": "x", "scope": "admin", "namespace": "b"})
    assert_problem(r, 403)
    made = await t.call("a-admin", "POST", "/api/v1/tokens", json={"name": "x", "scope": "read"})
    assert made.status_code == 201
    assert made.json()["namespace"] == "a"
    assert_problem(await t.call("a-admin", "DELETE", "/api/v1/tokens/b"), 404)
    assert_problem(await t.call("a-admin", "DELETE", "/api/v1/tokens/root"), 404)
    assert (await t.call("b", "GET", "/api/v1/jobs")).status_code == 200  # still valid
    # Nor raise its own quotas.
    r = await t.call("a-admin", "PATCH", "/api/v1/namespaces/a", json={"max_jobs": None})
    assert_problem(r, 403)
    r = await t.call("root", "POST", "/api/v1/tokens",
                     json={"name": "y", "scope": "read", "namespace": "Not Valid"})
    assert_problem(r, 422)


async def set_quotas(t: Tenants, name: str, **quotas: int | None) -> dict[str, Any]:
    r = await t.call("root", "PATCH", f"/api/v1/namespaces/{name}", json=quotas)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_max_jobs_holds_for_one_and_for_bulk(t: Tenants) -> None:
    await set_quotas(t, "a", max_jobs=2)
    three = [doc(f"j{i}") for i in range(3)]
    body = assert_problem(await t.call("a", "POST", "/api/v1/jobs", json=three), 422)
    assert (body["quota"], body["limit"], body["namespace"]) == ("max_jobs", 2, "a")
    assert (await t.call("a", "GET", "/api/v1/jobs")).json()["items"] == []  # all or none
    assert (await t.call("a", "POST", "/api/v1/jobs", json=three[:2])).status_code == 201
    assert_problem(await t.call("a", "POST", "/api/v1/jobs", json=doc("j9")), 422)
    # An admin creating into namespace a through the query parameter meets the same quota.
    r = await t.call("root", "POST", "/api/v1/jobs?namespace=a", json=doc("j8"))
    assert assert_problem(r, 422)["quota"] == "max_jobs"
    assert (await t.call("b", "POST", "/api/v1/jobs", json=doc("j9"))).status_code == 201
    assert (await t.call("a", "DELETE", "/api/v1/jobs/j0")).status_code == 204
    assert (await t.call("a", "POST", "/api/v1/jobs", json=doc("j9"))).status_code == 201
    (space,) = (await t.call("a", "GET", "/api/v1/namespaces")).json()["items"]
    assert (space["jobs"], space["max_jobs"]) == (2, 2)


async def test_max_payload_bytes_holds_on_create_and_update(t: Tenants) -> None:
    await set_quotas(t, "a", max_payload_bytes=200)
    big = doc("big", payload={"url": "https://example.org/hook", "body": "x" * 300})
    body = assert_problem(await t.call("a", "POST", "/api/v1/jobs", json=big), 422)
    assert body["quota"] == "max_payload_bytes"
    assert (await t.call("a", "POST", "/api/v1/jobs", json=doc("small"))).status_code == 201
    r = await t.call("a", "PATCH", "/api/v1/jobs/small", json={"payload": big["payload"]})
    assert assert_problem(r, 422)["quota"] == "max_payload_bytes"
    assert (await t.call("b", "POST", "/api/v1/jobs", json=big)).status_code == 201


async def test_max_runs_per_hour_is_429_with_retry_after(t: Tenants) -> None:
    await set_quotas(t, "a", max_runs_per_hour=1)
    await t.call("a", "POST", "/api/v1/jobs", json=doc("often"))
    assert (await t.call("a", "POST", "/api/v1/jobs/often/trigger")).status_code == 201
    await t.client.store.occurrence_claim(_claim(t))  # that run starts: 1 this hour
    r = await t.call("a", "POST", "/api/v1/jobs/often/trigger")
    body = assert_problem(r, 429)
    hour_end = START.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    assert body["quota"] == "max_runs_per_hour"
    assert body["resets_at"] == hour_end.isoformat().replace("+00:00", "Z")
    assert int(r.headers["Retry-After"]) == int((hour_end - START).total_seconds())
    t.clock.advance((hour_end - START).total_seconds())  # a new hour: the count starts again
    assert (await t.call("a", "POST", "/api/v1/jobs/often/trigger")).status_code == 201


def _claim(t: Tenants) -> OccurrenceClaimParams:
    return OccurrenceClaimParams(queue="default", worker="w", limit=10, now=t.clock.now())


async def test_the_python_client_meets_the_same_quotas(t: Tenants) -> None:
    await set_quotas(t, "a", max_jobs=1)
    client = t.client.scoped("a")
    await client.create_job(doc("one"))
    with pytest.raises(QuotaExceeded, match="max_jobs"):
        await client.create_jobs([doc("two")])
    with pytest.raises(QuotaExceeded, match="max_jobs"):
        await client.create_jobs(iter([doc("three")]))  # a stream is counted as it is read
    assert [j.spec.name for j in await client.list_jobs()] == ["one"]


async def test_metrics_show_each_namespaces_usage(t: Tenants) -> None:
    await set_quotas(t, "a", max_jobs=5)
    await t.call("a", "POST", "/api/v1/jobs", json=doc("m"))
    text = (await t.call("root", "GET", "/metrics")).text
    assert 'tickwork_namespace_jobs{namespace="a"} 1.0' in text
    assert 'tickwork_namespace_quota{namespace="a",quota="max_jobs"} 5.0' in text


def test_the_cli_meets_the_quotas_and_stays_in_its_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    with Client.open(url, namespace="b") as c:
        c.create_job(doc("theirs"))
    file = tmp_path / "jobs.ndjson"
    file.write_text("\n".join(f'{{"name": "n{i}", "kind": "http", "schedule": {{"every": '
                              f'"1h"}}, "payload": {{"url": "https://example.org/"}}}}'
                              for i in range(3)))
    assert main(["namespaces", "set", "a", "--max-jobs", "2", "--database", url]) == 0
    assert main(["jobs", "create", "--json", str(file), "--database", url,
                 "--namespace", "a"]) == 1
    assert "max_jobs" in capsys.readouterr().err
    monkeypatch.setenv("TICKWORK_NAMESPACE", "a")
    assert main(["jobs", "list", "--json", "--database", url]) == 0
    assert capsys.readouterr().out.strip() == "[]"
    assert main(["jobs", "show", "theirs", "--database", url]) == 2
    assert "no job 'theirs'" in capsys.readouterr().err


async def test_shared_queues_and_calendars_are_changed_only_by_every_namespace(
    t: Tenants,
) -> None:
    cal = {"name": "holidays", "dates": ["2030-12-25"]}
    assert_problem(await t.call("a", "POST", "/api/v1/calendars", json=cal), 403)
    assert_problem(await t.call("a-admin", "POST", "/api/v1/queues/default/pause"), 403)
    assert (await t.call("root", "POST", "/api/v1/calendars", json=cal)).status_code == 201
    for who, name in (("a", "mine"), ("b", "theirs")):
        job = doc(name, schedule={"cron": "0 3 * * *", "exclude": ["holidays"]})
        assert (await t.call(who, "POST", "/api/v1/jobs", json=job)).status_code == 201, who
    assert_problem(await t.call("a", "DELETE", "/api/v1/calendars/holidays"), 403)
    seen = (await t.call("a", "GET", "/api/v1/calendars/holidays")).json()
    assert seen["jobs"] == ["mine"]


async def test_alerts_are_listed_for_their_namespace_only(t: Tenants) -> None:
    for who, name in (("a", "mine"), ("b", "theirs")):
        job = (await t.call(who, "POST", "/api/v1/jobs", json=doc(name))).json()
        await t.client.store.alert_fire(AlertFireParams(
            job_id=job["id"], job_name=name, condition="run_dead", detail="x",
            now=t.clock.now(), cooldown_seconds=0))
    seen = (await t.call("a", "GET", "/api/v1/alerts")).json()["items"]
    assert [a["job_name"] for a in seen] == ["mine"]
    assert_problem(await t.call("a", "GET", "/api/v1/alerts?job=theirs"), 404)
    every = (await t.call("root", "GET", "/api/v1/alerts")).json()["items"]
    assert sorted(a["job_name"] for a in every) == ["mine", "theirs"]


async def test_enqueue_stays_in_the_namespace_and_meets_its_quotas(t: Tenants) -> None:
    request = {"kind": "http", "payload": {"url": "https://example.org/hook"},
               "dedupe_key": "order-42"}
    a = await t.call("a", "POST", "/api/v1/enqueue", json=request)
    assert a.status_code == 201, a.text
    assert a.json()["job"]["namespace"] == "a"
    # The same key in another namespace is another job: a's is neither found nor shown.
    b = await t.call("b", "POST", "/api/v1/enqueue", json=request)
    assert (b.status_code, b.json()["created"], b.json()["job"]["namespace"]) == (201, True, "b")
    again = await t.call("a", "POST", "/api/v1/enqueue", json=request)
    assert (again.status_code, again.json()["job"]["id"]) == (200, a.json()["job"]["id"])
    await set_quotas(t, "b", max_jobs=2)
    bulk = [{"kind": "http", "payload": {"url": "https://example.org/hook"}}] * 2
    r = await t.call("b", "POST", "/api/v1/enqueue/bulk", json=bulk)
    assert assert_problem(r, 422)["quota"] == "max_jobs"
    assert len((await t.call("b", "GET", "/api/v1/jobs")).json()["items"]) == 1


async def test_every_namespace_finds_names_in_default_and_ids_anywhere(t: Tenants) -> None:
    b = (await t.call("b", "POST", "/api/v1/jobs", json=doc("only-b"))).json()
    assert_problem(await t.call("root", "GET", "/api/v1/jobs/only-b"), 404)
    assert (await t.call("root", "GET", f"/api/v1/jobs/{b['id']}")).json()["name"] == "only-b"
    r = await t.call("root", "GET", "/api/v1/jobs/only-b?namespace=b")
    assert r.json()["id"] == b["id"]
    # So a job declared by name in default is created there, never matched to b's.
    r = await t.call("root", "POST", "/api/v1/jobs", json=doc("only-b"))
    assert (r.status_code, r.json()["namespace"]) == (201, "default")


async def test_lists_read_through_a_replica_stay_in_the_namespace(t: Tenants) -> None:
    await t.call("a", "POST", "/api/v1/jobs", json=doc("mine"))
    await b_job_with_a_run(t)
    reader = AsyncClient(t.client.store, clock=t.clock)  # a replica: here, the same store
    app = create_app(t.client, read_client=reader, metrics=Metrics())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1:8000") as http:
        headers = {"Authorization": f"Bearer {t.tokens['a']}"}
        jobs = (await http.get("/api/v1/jobs", headers=headers)).json()["items"]
        runs = (await http.get("/api/v1/runs", headers=headers)).json()["items"]
    assert [j["name"] for j in jobs] == ["mine"]
    assert runs == []
