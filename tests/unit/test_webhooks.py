"""Signed webhooks: checked against an independent Standard Webhooks implementation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from cryptography.fernet import Fernet

from tickwork.drivers.sqlite.secrets import SqliteSecretStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError, ValidationError
from tickwork.executors import ExecutorSettings, build_executors, validate_payload
from tickwork.executors.base import Executor
from tickwork.executors.webhooks import InvalidSignature, sign, signature_headers, verify
from tickwork.outcomes import Fail, Success
from tickwork.secrets import SecretKeyring, SecretResolver
from tickwork.testing.jobs import make_context

KEY_A = "whsec_" + base64.b64encode(b"first secret key, 32 bytes long!").decode()
KEY_B = "whsec_" + base64.b64encode(b"second key").decode()


def reference_signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    """The spec, written out: base64(HMAC-SHA256(base64decode(secret minus whsec_),
    "{id}.{timestamp}.{body}"))."""
    key = base64.b64decode(secret.split("_", 1)[1])
    content = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    return base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()


# --- the helpers --------------------------------------------------------------------------


def test_sign_matches_the_spec() -> None:
    body = b'{"a": 1}'
    assert sign(KEY_A, "msg_1", 1700000000, body) == \
        "v1," + reference_signature(KEY_A, "msg_1", "1700000000", body)
    both = sign([KEY_A, KEY_B], "msg_1", 1700000000, body).split(" ")
    assert both == [f"v1,{reference_signature(k, 'msg_1', '1700000000', body)}"
                    for k in (KEY_A, KEY_B)]
    assert sign(f"{KEY_A} {KEY_B}", "msg_1", 1700000000, body) == " ".join(both)


def test_verify_accepts_a_good_signature_and_either_rotated_secret() -> None:
    body = b"payload"
    headers = signature_headers(KEY_A, "id-1", 1000, body)
    verify(KEY_A, headers, body, now=1000)
    verify([KEY_B, KEY_A], {k.upper(): v for k, v in headers.items()}, body, now=1100)
    rotating = signature_headers([KEY_A, KEY_B], "id-1", 1000, body)
    verify(KEY_B, rotating, body, now=1000)
    verify(KEY_A, rotating, body.decode(), now=datetime.fromtimestamp(1000, UTC))


@pytest.mark.parametrize(("change", "message"), [
    ({"webhook-signature": "v1,AAAA"}, "no v1 signature matches"),
    ({"webhook-signature": "v2,whatever"}, "no v1 signature matches"),
    ({"webhook-id": "other"}, "no v1 signature matches"),
    ({"webhook-timestamp": "699"}, "more than 300s old"),
    ({"webhook-timestamp": "1301"}, "more than 300s in the future"),
    ({"webhook-timestamp": "soon"}, "not a Unix time"),
])
def test_verify_rejects(change: dict[str, str], message: str) -> None:
    headers = {**signature_headers(KEY_A, "id-1", 1000, b"x"), **change}
    with pytest.raises(InvalidSignature, match=message):
        verify(KEY_A, headers, b"x", now=1000)


def test_verify_rejects_a_changed_body_a_missing_header_and_the_wrong_secret() -> None:
    headers = signature_headers(KEY_A, "id-1", 1000, b"x")
    with pytest.raises(InvalidSignature):
        verify(KEY_A, headers, b"y", now=1000)
    with pytest.raises(InvalidSignature, match="missing header webhook-signature"):
        verify(KEY_A, {"webhook-id": "id-1", "webhook-timestamp": "1000"}, b"x", now=1000)
    with pytest.raises(InvalidSignature):
        verify(KEY_B, headers, b"x", now=1000)
    verify(KEY_A, headers, b"x", now=1000 + 3600, tolerance_seconds=3600)


def test_a_secret_must_be_whsec_base64() -> None:
    with pytest.raises(ValueError, match="whsec_ followed by base64"):
        sign("whsec_not base64!", "i", 1, b"")


# --- the http kind signs ------------------------------------------------------------------


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    seen: list[tuple[dict[str, str], bytes]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append((dict(request.headers), await request.read()))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    await runner.cleanup()


async def executors_with(tmp_path: Path, secrets: dict[str, str],
                         **settings: object) -> dict[str, Executor]:
    url = f"sqlite:///{tmp_path}/tickwork.db"
    store = SqliteStore(url)
    await store.migrate()
    await store.close()
    keyring = SecretKeyring([Fernet.generate_key().decode()])
    secret_store = SqliteSecretStore(url)
    for name, value in secrets.items():
        await secret_store.secret_set(name, keyring.encrypt(value), datetime.now(UTC))
    return build_executors(ExecutorSettings(outbound_allow=("127.0.0.1",), **settings),
                           SecretResolver(secret_store, keyring))


async def test_a_job_secret_signs_the_request(
        tmp_path: Path, receiver: tuple[str, list[tuple[dict[str, str], bytes]]]) -> None:
    base, seen = receiver
    executors = await executors_with(tmp_path, {"hook": KEY_A})
    before = int(time.time())
    payload = {"url": f"{base}/hook", "body": {"n": 1}, "signing_secret": {"$secret": "hook"}}
    outcome = await executors["http"].execute(make_context("http", payload))
    await executors["http"].close()
    assert outcome == Success(output="HTTP 200\nok")
    [(headers, body)] = seen
    assert json.loads(body) == {"n": 1}
    assert headers["webhook-id"] == headers["Idempotency-Key"] == "job-1:2030-01-02T03:04:05Z"
    assert before <= int(headers["webhook-timestamp"]) <= int(time.time())
    expected = reference_signature(KEY_A, headers["webhook-id"], headers["webhook-timestamp"],
                                   body)
    assert headers["webhook-signature"] == f"v1,{expected}"
    verify(KEY_A, headers, body)


async def test_rotation_signs_with_both_secrets(
        tmp_path: Path, receiver: tuple[str, list[tuple[dict[str, str], bytes]]]) -> None:
    base, seen = receiver
    executors = await executors_with(tmp_path, {"new": KEY_A, "old": KEY_B})
    payload = {"url": f"{base}/hook", "raw_body": "hello",
               "signing_secret": [{"$secret": "new"}, {"$secret": "old"}]}
    assert isinstance(await executors["http"].execute(make_context("http", payload)), Success)
    await executors["http"].close()
    [(headers, body)] = seen
    signatures = headers["webhook-signature"].split(" ")
    assert signatures == [
        "v1," + reference_signature(k, headers["webhook-id"], headers["webhook-timestamp"], body)
        for k in (KEY_A, KEY_B)]
    verify(KEY_A, headers, body)
    verify(KEY_B, headers, body)


async def test_an_endpoint_secret_from_the_config_signs_matching_urls(
        tmp_path: Path, receiver: tuple[str, list[tuple[dict[str, str], bytes]]]) -> None:
    base, seen = receiver
    executors = await executors_with(
        tmp_path, {"short": KEY_B, "long": KEY_A},
        webhook_signing_secrets=(f"{base}/=short", f"{base}/hooks/=long"))
    for path in ("/hooks/a", "/other"):
        outcome = await executors["http"].execute(make_context("http", {"url": base + path}))
        assert isinstance(outcome, Success)
    await executors["http"].close()
    (first, body1), (second, body2) = seen
    verify(KEY_A, first, body1)
    verify(KEY_B, second, body2)
    with pytest.raises(InvalidSignature):
        verify(KEY_B, first, body1)


async def test_a_bad_signing_secret_is_a_fatal_error(tmp_path: Path) -> None:
    executors = await executors_with(tmp_path, {"hook": "not-a-whsec"})
    payload = {"url": "http://127.0.0.1:9/", "signing_secret": {"$secret": "hook"}}
    outcome = await executors["http"].execute(make_context("http", payload))
    assert outcome == Fail("payload.signing_secret: a webhook secret must be whsec_ followed "
                           "by base64", retriable=False)


def test_signing_secret_must_be_a_reference() -> None:
    with pytest.raises(ValidationError, match="never the secret itself") as info:
        validate_payload("http", {"url": "http://h/", "signing_secret": KEY_A})
    assert info.value.field == "payload.signing_secret"
    with pytest.raises(ValidationError, match="at most 2"):
        validate_payload("http", {"url": "http://h/", "signing_secret": [
            {"$secret": "a"}, {"$secret": "b"}, {"$secret": "c"}]})


def test_endpoint_secrets_setting_is_checked() -> None:
    from tickwork.config import load_settings

    settings = load_settings(env={"TICKWORK_WEBHOOK_SIGNING_SECRETS": "https://a.example/=k1"})
    assert settings.executors.webhook_signing_secrets == ("https://a.example/=k1",)
    for bad in ("https://a.example/", "a.example=k", "https://a.example/=bad name"):
        with pytest.raises(ConfigError) as info:
            load_settings(env={"TICKWORK_WEBHOOK_SIGNING_SECRETS": bad})
        assert info.value.field == "executors.webhook_signing_secrets"
