"""Secrets belong to a namespace: a job resolves ``{"$secret": name}`` in its own namespace only.

On SQLite and PostgreSQL alike: a reference to a secret only another namespace has is refused
when the job is created, changed or enqueued (422, saying nothing of the other namespace), a
job written to the store directly fails at execution with "no secret" and the value never
leaves the store, and the same name in two namespaces resolves to each one's own value. The
CLI sets, lists and deletes secrets of one namespace and rotates them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import random
import sqlite3
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from aiohttp import web
from cryptography.fernet import Fernet
from test_api import assert_problem

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.cli.main import main
from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.document import to_spec
from tickwork.drivers import open_driver
from tickwork.drivers.base import Completion, JobCreateManyParams, JobCreateParams
from tickwork.drivers.postgres import store as postgres_store
from tickwork.drivers.secrets import SecretStore
from tickwork.drivers.sqlite import store as sqlite_store
from tickwork.drivers.sqlite.secrets import SqliteSecretStore
from tickwork.executors import ExecutorSettings, build_executors
from tickwork.metrics import Metrics
from tickwork.models import rfc3339
from tickwork.scheduler.planner import Planner
from tickwork.secrets import KEY_ENV, SecretKeyring, SecretResolver
from tickwork.testing import postgres as pg
from tickwork.testing.harness import START
from tickwork.worker.pool import WorkerPool

KEY = Fernet.generate_key().decode()
A_VALUE = "value-of-a/9f1c"
B_VALUE = "value-of-b/77d2"
ONLY_B = "only-b-value/3e8a"


@dataclass
class World:
    """A store (SQLite or PostgreSQL) with its API, secret store and tokens of two namespaces."""

    url: str
    client: AsyncClient
    secrets: SecretStore
    keyring: SecretKeyring
    http: httpx.AsyncClient
    tokens: dict[str, str]

    async def call(self, who: str, method: str, url: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return await self.http.request(method, url, headers=headers, **kw)

    async def set(self, name: str, value: str, namespace: str) -> None:
        await self.secrets.secret_set(name, self.keyring.encrypt(value), START,
                                      namespace=namespace)


@pytest.fixture(params=["sqlite", "postgres"])
async def world(request: pytest.FixtureRequest, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[World]:
    monkeypatch.setenv(KEY_ENV, KEY)
    url = (f"sqlite:///{tmp_path}/tickwork.db" if request.param == "sqlite"
           else request.getfixturevalue("postgres_url"))
    client = await AsyncClient.open(url, clock=FakeClock(START))
    tokens = {}
    for who, namespace in (("a", "a"), ("b", "b"), ("root", None)):
        tokens[who] = (await create_token(client, who, "write", namespace))[0]
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(
        client, metrics=Metrics())), base_url="http://127.0.0.1:8000")
    secrets = open_driver(url).secret_store()
    yield World(url=url, client=client, secrets=secrets, keyring=SecretKeyring([KEY]),
                http=http, tokens=tokens)
    await secrets.close()
    await http.aclose()
    await client.close()


def http_job(name: str, url: str, secret: str) -> dict[str, Any]:
    return {"name": name, "kind": "http", "schedule": {"at": rfc3339(START)},
            "retry": {"max_attempts": 1},
            "payload": {"url": url, "headers": {"Authorization": {"$secret": secret}}}}


async def test_a_reference_to_another_namespaces_secret_is_refused(world: World) -> None:
    await world.set("tok", B_VALUE, "b")
    doc = http_job("hook", "https://example.org/hook", "tok")
    refused = assert_problem(await world.call("a", "POST", "/api/v1/jobs", json=doc), 422)
    assert refused["errors"][0]["field"] == "payload.headers.Authorization"
    assert refused["detail"] == ("payload.headers.Authorization: no secret 'tok' in namespace "
                                 "'a'; set it with `tickwork secrets set tok --namespace a`")
    # Every face of creation: bulk, enqueue, a token that sees every namespace naming a.
    bulk = await world.call("a", "POST", "/api/v1/jobs", json=[doc])
    assert assert_problem(bulk, 422)["errors"][0]["field"] == (
        "[0].payload.headers.Authorization")
    enqueue = {"kind": "http", "payload": doc["payload"]}
    assert_problem(await world.call("a", "POST", "/api/v1/enqueue", json=enqueue), 422)
    assert_problem(await world.call("root", "POST", "/api/v1/jobs?namespace=a", json=doc), 422)
    # A job of a changed to name it is refused too; b's own job may.
    plain = {**doc, "payload": {"url": "https://example.org/hook"}}
    assert (await world.call("a", "POST", "/api/v1/jobs", json=plain)).status_code == 201
    changed = await world.call("a", "PATCH", "/api/v1/jobs/hook", json={"payload": doc["payload"]})
    assert "no secret 'tok' in namespace 'a'" in assert_problem(changed, 422)["detail"]
    assert (await world.call("b", "POST", "/api/v1/jobs", json=doc)).status_code == 201
    # Once a has a secret of that name, a may use it.
    await world.set("tok", A_VALUE, "a")
    assert (await world.call("a", "PATCH", "/api/v1/jobs/hook",
                             json={"payload": doc["payload"]})).status_code == 200


@dataclass
class Echo:
    url: str
    seen: dict[str, list[str]] = field(default_factory=dict)  # path: Authorization headers


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    server = Echo(url="")

    async def handle(request: web.Request) -> web.Response:
        server.seen.setdefault(request.path, []).append(request.headers.get("Authorization", ""))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield server
    await runner.cleanup()


async def run_all(world: World, n: int) -> list[Completion]:
    """Plan and run what is due on the world's store with a worker that resolves secrets."""
    clock = world.client.clock
    assert isinstance(clock, FakeClock)
    executors = build_executors(ExecutorSettings(outbound_allow=("127.0.0.1",)),
                                SecretResolver(world.secrets, world.keyring))
    pool = WorkerPool(store=world.client.store, clock=clock, executors=executors,
                      queues=[("default", 4)], worker_id="w1", lease_seconds=30,
                      heartbeat_seconds=10, poll_interval_seconds=1, shutdown_grace_seconds=5,
                      rng=random.Random(7))
    written: asyncio.Queue[tuple[Completion, bool]] = asyncio.Queue()
    pool.completer.on_written = lambda c, ok: written.put_nowait((c, ok))
    await Planner(store=world.client.store, clock=clock, horizon_seconds=2,
                  interval_seconds=1).run_once(clock.now())
    pool.start()
    try:
        done = [(await asyncio.wait_for(written.get(), 10))[0] for _ in range(n)]
    finally:
        await pool.stop(grace_seconds=0)
        for executor in executors.values():
            await executor.close()
    return done


async def test_each_namespace_resolves_its_own_value_and_never_another(
        world: World, echo: Echo) -> None:
    await world.set("tok", A_VALUE, "a")
    await world.set("tok", B_VALUE, "b")
    await world.set("only-b", ONLY_B, "b")
    job_a = await world.client.scoped("a").create_job(http_job("hook", f"{echo.url}/a", "tok"))
    job_b = await world.client.scoped("b").create_job(http_job("hook", f"{echo.url}/b", "tok"))
    # Written to the store directly, past the check on creation: the worker refuses it.
    (stolen,) = await world.client.store.job_create_many(JobCreateManyParams(jobs=[
        JobCreateParams(spec=to_spec(http_job("steal", f"{echo.url}/steal", "only-b")),
                        next_run_at=START, now=START, namespace="a")]))
    done = await run_all(world, 3)
    assert {c.job_id: c.state.value for c in done} == {
        job_a.id: "succeeded", job_b.id: "succeeded", stolen.id: "dead"}
    assert echo.seen == {"/a": [A_VALUE], "/b": [B_VALUE]}  # nothing reached /steal
    (attempt,) = await world.client.store.attempt_list(stolen.id, START)
    assert attempt.error is not None
    assert attempt.error.startswith("payload: no secret 'only-b' in namespace 'a'")
    texts = json.dumps([[a.output, a.error] for job in (job_a, job_b, stolen)
                        for a in await world.client.store.attempt_list(job.id, START)])
    assert ONLY_B not in texts
    assert A_VALUE not in texts
    assert B_VALUE not in texts


# --- the CLI ------------------------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], *args: str, stdin: str | None = None,
        code: int = 0) -> str:
    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        got = main(list(args))
    finally:
        sys.stdin = old
    out, err = capsys.readouterr()
    assert got == code, out + err
    return out + err


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    import os

    for name in [n for n in os.environ if n.startswith("TICKWORK_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv(KEY_ENV, KEY)
    url = f"sqlite:///{tmp_path}/tickwork.db"
    monkeypatch.setenv("TICKWORK_DATABASE_URL", url)
    return url


def read(url: str, name: str, namespace: str, key: str = KEY) -> str:
    async def get() -> str:
        resolver = SecretResolver(SqliteSecretStore(url), SecretKeyring([key]))
        return await resolver.get(name, namespace=namespace)

    return asyncio.run(get())


def test_cli_namespace(env: str, monkeypatch: pytest.MonkeyPatch,
                       capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "secrets", "set", "tok", stdin="default-value") == "secret tok set\n"
    assert cli(capsys, "secrets", "set", "tok", "--namespace", "acme",
               stdin="acme-value") == "secret tok set in namespace acme\n"
    monkeypatch.setenv("TICKWORK_NAMESPACE", "globex")
    cli(capsys, "secrets", "set", "other", stdin="globex-value")
    assert [s["name"] for s in json.loads(cli(capsys, "secrets", "list", "--json"))] == ["other"]
    monkeypatch.delenv("TICKWORK_NAMESPACE")
    assert [s["name"] for s in json.loads(cli(capsys, "secrets", "list", "--json"))] == ["tok"]
    assert read(env, "tok", "default") == "default-value"
    assert read(env, "tok", "acme") == "acme-value"
    assert read(env, "other", "globex") == "globex-value"

    # Rotation re-encrypts every namespace's secrets.
    new = Fernet.generate_key().decode()
    monkeypatch.setenv(KEY_ENV, f"{new},{KEY}")
    assert "re-encrypted 3 secret(s)" in cli(capsys, "secrets", "rotate")
    assert read(env, "tok", "acme", key=new) == "acme-value"
    assert read(env, "other", "globex", key=new) == "globex-value"

    # Deleting in one namespace leaves the others; a name another namespace has is not found.
    cli(capsys, "secrets", "delete", "tok", "--namespace", "acme")
    assert read(env, "tok", "default", key=new) == "default-value"
    err = cli(capsys, "secrets", "delete", "other", "--namespace", "acme", code=2)
    assert "no secret 'other' in namespace 'acme'" in err
    assert "globex" not in err
    err = cli(capsys, "secrets", "list", "--namespace", "Not Valid", code=2)
    assert "--namespace" in err
    assert "Traceback" not in err


# --- the migration --------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_secrets_set_before_namespaces_move_to_default(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database migrated up to the version before secrets had namespaces keeps its secrets,
    in ``default``, once migrated on."""
    module: Any = sqlite_store if backend == "sqlite" else postgres_store
    last = 14 if backend == "sqlite" else 13
    every = module.MIGRATIONS
    monkeypatch.setattr(module, "MIGRATIONS", [m for m in every if m[0] < last])
    with contextlib.ExitStack() as stack:
        url = (f"sqlite:///{tmp_path}/old.db" if backend == "sqlite"
               else stack.enter_context(pg.scratch_database()))
        driver = open_driver(url)
        try:
            await driver.migrate()
            insert = "INSERT INTO secrets (name, value, created_at, updated_at) VALUES "
            if backend == "sqlite":
                with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
                    conn.execute(insert + "('smtp', ?, 0, 0)", (b"old-ciphertext",))
            else:
                async with await psycopg.AsyncConnection.connect(url) as conn:
                    await conn.execute(insert + "('smtp', %s, now(), now())",
                                       (b"old-ciphertext",))
            monkeypatch.setattr(module, "MIGRATIONS", every)
            assert await driver.store.migrations_pending() == [
                version for version, _, _ in every if version >= last]
            await driver.migrate()
        finally:
            await driver.close()
        secrets = open_driver(url).secret_store()
        try:
            assert await secrets.secret_get("smtp") == b"old-ciphertext"
            assert await secrets.secret_namespaces() == ["default"]
            await secrets.secret_set("smtp", b"acme's", START, namespace="acme")
            assert await secrets.secret_get("smtp") == b"old-ciphertext"
        finally:
            await secrets.close()
