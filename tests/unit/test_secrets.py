"""Secrets: encrypted at rest, write-only CLI, resolved at execution, masked everywhere after."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from aiohttp import web
from cryptography.fernet import Fernet

from tickwork.cli.main import main
from tickwork.config import load_settings
from tickwork.drivers.secrets import SecretNotFound, SecretStore
from tickwork.drivers.sqlite.secrets import SqliteSecretStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError, ValidationError
from tickwork.executors import ExecutorSettings, build_executors, validate_payload
from tickwork.models import rfc3339
from tickwork.outcomes import Fail
from tickwork.secrets import (
    KEY_ENV,
    SecretKeyring,
    SecretResolver,
    SecretsUnavailable,
    find_references,
    mask,
)
from tickwork.testing.harness import START, Harness, make_harness
from tickwork.testing.jobs import make_context

SECRET = "s3cr3t-T0ken/with+chars"
KEY = Fernet.generate_key().decode()
NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A clean TICKWORK_* environment with a key; returns the database URL."""
    import os

    for name in [n for n in os.environ if n.startswith("TICKWORK_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv(KEY_ENV, KEY)
    url = f"sqlite:///{tmp_path}/tickwork.db"
    monkeypatch.setenv("TICKWORK_DATABASE_URL", url)
    return url


@pytest.fixture
async def secret_store(tmp_path: Path) -> AsyncIterator[SecretStore]:
    url = f"sqlite:///{tmp_path}/tickwork.db"
    store = SqliteStore(url)
    await store.migrate()
    await store.close()
    secrets = SqliteSecretStore(url)
    yield secrets
    await secrets.close()


# --- the store (the conformance a PostgreSQL SecretStore must also pass) ------------------


async def test_store_set_get_list_delete(secret_store: SecretStore) -> None:
    await secret_store.secret_set("b", b"one", NOW)
    await secret_store.secret_set("a", b"two", NOW)
    await secret_store.secret_set("b", b"three", NOW + timedelta(seconds=5))
    assert await secret_store.secret_get("b") == b"three"
    assert await secret_store.secret_list() == [("a", NOW), ("b", NOW + timedelta(seconds=5))]
    await secret_store.secret_delete("a")
    with pytest.raises(SecretNotFound, match="no secret 'a'"):
        await secret_store.secret_get("a")
    with pytest.raises(SecretNotFound):
        await secret_store.secret_delete("a")
    assert [name for name, _ in await secret_store.secret_list()] == ["b"]


# --- keys, references, masking ------------------------------------------------------------


def test_keyring_rotation() -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    token = SecretKeyring([old]).encrypt(SECRET)
    assert SECRET.encode() not in token
    both = SecretKeyring.from_env({KEY_ENV: f"{new}, {old}"})
    assert both.decrypt("x", token) == SECRET
    rotated = both.rotate(token)
    assert SecretKeyring([new]).decrypt("x", rotated) == SECRET
    with pytest.raises(SecretsUnavailable, match="secret 'x' cannot be decrypted"):
        SecretKeyring([new]).decrypt("x", token)


def test_keyring_errors() -> None:
    with pytest.raises(SecretsUnavailable, match="TICKWORK_SECRET_KEY is not set"):
        SecretKeyring.from_env({})
    with pytest.raises(ConfigError) as info:
        SecretKeyring.from_env({KEY_ENV: f"{KEY},nope"})
    assert info.value.field == KEY_ENV
    assert info.value.reason.startswith("key 2 is not a Fernet key")


def test_the_key_is_not_a_setting() -> None:
    assert load_settings(env={KEY_ENV: KEY}) == load_settings(env={})


def test_references_are_found_and_validated() -> None:
    payload = {"url": "http://h/", "headers": {"A": {"$secret": "a"}},
               "body": {"x": [{"$secret": "b"}, {"$secret": "a"}]}}
    assert find_references(payload) == ["a", "b"]
    assert validate_payload("http", payload)["headers"] == {"A": {"$secret": "a"}}
    for bad, field in [({"$secret": "a", "x": 1}, "payload.headers.A"),
                       ({"$secret": "no spaces"}, "payload.headers.A"),
                       ({"$secret": 3}, "payload.headers.A")]:
        with pytest.raises(ValidationError) as info:
            validate_payload("http", {"url": "http://h/", "headers": {"A": bad}})
        assert info.value.field == field


def test_mask_every_form_and_a_cut_tail() -> None:
    text = f"a {SECRET} b {json.dumps(SECRET)} c s3cr3t-T0ken%2Fwith%2Bchars"
    assert mask(text, {SECRET}) == 'a **** b "****" c ****'
    assert mask(f"x {SECRET[:7]}\n[truncated]", {SECRET}) == "x ****\n[truncated]"
    assert mask("nothing here", {SECRET}) == "nothing here"


SPACED = "Bearer ab/c+d=é\"x"  # a space, URL and JSON specials, a non-ASCII letter


def _lower_hex(text: str) -> str:
    return re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), text)


@pytest.mark.parametrize("spelling", [
    pytest.param(lambda v: v, id="raw"),
    pytest.param(lambda v: quote(v, safe=""), id="percent-upper"),
    pytest.param(lambda v: _lower_hex(quote(v, safe="")), id="percent-lower"),
    pytest.param(quote, id="percent-slash-kept"),
    pytest.param(quote_plus, id="quote_plus"),
    pytest.param(lambda v: _lower_hex(quote_plus(v)), id="quote_plus-lower"),
    pytest.param(lambda v: quote(v, safe="/+=\"é"), id="percent-some-kept"),
    pytest.param(lambda v: json.dumps(v)[1:-1], id="json-ascii"),
    pytest.param(lambda v: json.dumps(v, ensure_ascii=False)[1:-1], id="json-utf8"),
    pytest.param(lambda v: json.dumps(v)[1:-1].replace("/", "\\/").replace("\\u00e9",
                                                                             "\\u00E9"),
                 id="json-slash-upper-hex"),
    pytest.param(lambda v: base64.b64encode(v.encode()).decode(), id="base64"),
    pytest.param(lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("="),
                 id="base64-url"),
])
@pytest.mark.parametrize("value", [SECRET, SPACED])
def test_mask_each_promised_spelling(spelling: Any, value: str) -> None:
    shown = spelling(value)
    assert mask(f"got <{shown}> back", {value}) == "got <****> back", shown


async def test_resolver(secret_store: SecretStore) -> None:
    keyring = SecretKeyring([KEY])
    await secret_store.secret_set("tok", keyring.encrypt(SECRET), NOW)
    resolver = SecretResolver(secret_store, keyring)
    payload = {"a": [{"$secret": "tok"}], "b": {"c": {"$secret": "tok"}}, "d": 1}
    assert await resolver.resolve(payload, namespace="default") == {
        "a": [SECRET], "b": {"c": SECRET}, "d": 1}
    assert payload["a"] == [{"$secret": "tok"}]  # the stored payload is never changed
    with pytest.raises(SecretNotFound):
        await resolver.resolve({"a": {"$secret": "missing"}}, namespace="default")


async def test_missing_secret_and_missing_store_are_fatal(secret_store: SecretStore) -> None:
    payload = {"callable": "tickwork.testing.jobs:greet", "args": [{"$secret": "nope"}]}
    settings = ExecutorSettings(python_allowed_modules=("tickwork.testing",))
    with_store = build_executors(settings, SecretResolver(secret_store, SecretKeyring([KEY])))
    outcome = await with_store["python"].execute(make_context("python", payload))
    assert outcome == Fail("payload: no secret 'nope'; set it with `tickwork secrets set nope`",
                           retriable=False)
    without = build_executors(settings)
    outcome = await without["python"].execute(make_context("python", payload))
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert "this worker has no secret store" in outcome.error


# --- end to end: the value never leaves the attempt ---------------------------------------


@pytest.fixture
async def echo_server() -> AsyncIterator[str]:
    """Echoes headers and body back; /fail does so with a 500."""

    async def handle(request: web.Request) -> web.Response:
        text = json.dumps({"headers": dict(request.headers), "body": await request.text()})
        return web.Response(status=500 if request.path == "/fail" else 200, text=text)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


@pytest.fixture
async def harness_with_secrets(tmp_path: Path, env: str) -> AsyncIterator[Harness]:
    async with make_harness(tmp_path) as h:
        resolver = SecretResolver(SqliteSecretStore(h.store.path))
        await resolver.store.secret_set("tok", resolver.keyring().encrypt(SECRET), NOW)
        h.pool.executors = build_executors(ExecutorSettings(
            python_allowed_modules=("tickwork.testing",), outbound_allow=("127.0.0.1",)),
            resolver)
        yield h


def cli(capsys: pytest.CaptureFixture[str], *args: str, stdin: str | None = None) -> str:
    if stdin is not None:
        import sys

        old, sys.stdin = sys.stdin, io.StringIO(stdin)
        try:
            code = main(list(args))
        finally:
            sys.stdin = old
    else:
        code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out + err


async def test_a_secret_never_reaches_the_store_logs_or_cli(
        harness_with_secrets: Harness, echo_server: str, env: str,
        caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    h = harness_with_secrets
    ref = {"$secret": "tok"}
    jobs = [
        ("echo-ok", "http", {"url": f"{echo_server}/ok", "headers": {"Authorization": ref},
                             "body": {"token": ref}}),
        ("echo-fail", "http", {"url": f"{echo_server}/fail", "raw_body": ref}),
        ("python-echo", "python", {"callable": "tickwork.testing.jobs:echo", "args": [ref]}),
        ("python-boom", "python", {"callable": "tickwork.testing.jobs:boom", "args": [ref]}),
        ("bad-url", "http", {"url": ref}),  # the value is not a URL: the error would quote it
    ]
    caplog.set_level(logging.DEBUG)
    created = []
    for name, kind, payload in jobs:
        created.append(await h.client.create_job({
            "name": name, "schedule": {"at": rfc3339(START)}, "kind": kind, "payload": payload,
            "retry": {"max_attempts": 1}}))
    await h.tick()
    done = await h.completed_n(len(jobs))
    assert sorted(c.state.value for c in done) == ["dead", "dead", "dead", "succeeded",
                                                    "succeeded"]

    texts: list[str] = []
    for job in created:
        stored = await h.store.job_get(job.id)
        assert SECRET not in json.dumps(stored.spec.payload)
        assert "$secret" in json.dumps(stored.spec.payload)
        [attempt] = await h.store.attempt_list(job.id, START)
        texts += [attempt.output or "", attempt.error or ""]
        # main() runs its own event loop: off this one, in a thread
        texts.append(await asyncio.to_thread(cli, capsys, "runs", "show", job.id,
                                             rfc3339(START), "--json"))
        texts.append(await asyncio.to_thread(cli, capsys, "jobs", "show", job.id, "--json"))
    texts.append(await asyncio.to_thread(cli, capsys, "runs", "list", "--json"))
    texts.append(await asyncio.to_thread(cli, capsys, "secrets", "list", "--json"))
    texts += [r.getMessage() + (r.exc_text or "") for r in caplog.records]
    everything = "\n".join(texts)
    assert SECRET not in everything
    assert "s3cr3t" not in everything
    assert "****" in everything  # the echoes did come back, masked
    assert '"Authorization": "****"' in everything


def test_the_smtp_password_is_not_in_the_settings_repr() -> None:
    assert SECRET not in repr(ExecutorSettings(smtp_password=SECRET))


# --- the CLI ------------------------------------------------------------------------------


def test_cli_is_write_only(env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = cli(capsys, "secrets", "set", "api-token", stdin=SECRET + "\n")
    assert out == "secret api-token set\n"
    value_file = tmp_path / "value"
    value_file.write_text("other-value\n")
    cli(capsys, "secrets", "set", "second", "--value-file", str(value_file))
    listing = json.loads(cli(capsys, "secrets", "list", "--json"))
    assert [item["name"] for item in listing] == ["api-token", "second"]
    assert set(listing[0]) == {"name", "updated_at"}
    table = cli(capsys, "secrets", "list")
    assert "api-token" in table
    assert SECRET not in table
    assert "other-value" not in table
    db = Path(env.removeprefix("sqlite:///"))
    raw = b"".join(p.read_bytes() for p in db.parent.glob("tickwork.db*"))
    assert SECRET.encode() not in raw
    assert b"other-value" not in raw

    async def read(name: str) -> str:
        return await SecretResolver(SqliteSecretStore(env)).get(name)

    assert asyncio.run(read("api-token")) == SECRET  # one trailing newline dropped
    assert cli(capsys, "secrets", "delete", "second") == "secret second deleted\n"
    assert main(["secrets", "delete", "second"]) == 2
    assert "no secret 'second'" in capsys.readouterr().err


def test_cli_rotate(env: str, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "secrets", "set", "a", stdin="value-a")
    new = Fernet.generate_key().decode()
    monkeypatch.setenv(KEY_ENV, f"{new},{KEY}")
    assert cli(capsys, "secrets", "rotate") == "re-encrypted 1 secret(s) with the first key\n"
    monkeypatch.setenv(KEY_ENV, new)
    assert asyncio.run(SecretResolver(SqliteSecretStore(env)).get("a")) == "value-a"


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (("secrets", "set", "bad name"), "x", "NAME: secret name 'bad name' must be"),
    (("secrets", "set", "ok"), "", "standard input: the value is empty"),
    (("secrets", "set", "ok", "--value-file", "/nonexistent"), None, "--value-file: cannot read"),
])
def test_cli_errors(env: str, capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                    stdin: str | None, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_cli_without_a_key(env: str, monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.setattr("sys.stdin", io.StringIO("v"))
    assert main(["secrets", "set", "x"]) == 1
    assert "TICKWORK_SECRET_KEY is not set" in capsys.readouterr().err
