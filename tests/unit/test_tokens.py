"""Authentication: bearer tokens and scopes, the dashboard's cookie session with CSRF checks,
open access on loopback, and the `tickwork tokens` commands."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_api import DOC, Api, assert_problem, open_api

from tickwork.cli.main import main
from tickwork.drivers.sqlite.store import SqliteStore


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    a, store = await open_api(tmp_path)
    yield a
    await a.http.aclose()
    await store.close()


async def test_no_or_bad_token_is_401(api: Api) -> None:
    body = assert_problem(await api.http.get("/api/v1/jobs"), 401)
    assert "Bearer" in body["detail"]
    assert (await api.http.get("/api/v1/jobs")).headers["www-authenticate"] == "Bearer"
    r = await api.http.get("/api/v1/jobs", headers={"Authorization": "Bearer tw_nope"})
    assert_problem(r, 401)
    r = await api.http.get("/api/v1/jobs", headers={"Authorization": "Basic dXNlcjpwdw=="})
    assert_problem(r, 401)
    # Never from a query string.
    r = await api.http.get("/api/v1/jobs", params={"token": api.tokens["admin"],
                                                   "access_token": api.tokens["admin"]})
    assert_problem(r, 401)


async def test_scopes_read_write_admin(api: Api) -> None:
    assert (await api.get("/api/v1/jobs", scope="read")).status_code == 200
    assert_problem(await api.post("/api/v1/jobs", scope="read", json=DOC), 403)
    assert (await api.post("/api/v1/jobs", scope="write", json=DOC)).status_code == 201
    assert_problem(await api.get("/api/v1/tokens", scope="write"), 403)
    assert_problem(await api.post("/api/v1/queues/default/pause", scope="write"), 403)
    assert (await api.get("/api/v1/tokens", scope="admin")).status_code == 200


async def test_tokens_created_listed_and_revoked_over_the_api(api: Api) -> None:
    r = await api.post("/api/v1/tokens", scope="admin", json={"name": "ci", "scope": "read"})
    assert r.status_code == 201, r.text
    secret = r.json()["token"]
    assert secret.startswith("tw_")
    assert len(secret) > 40
    listed = (await api.get("/api/v1/tokens", scope="admin")).json()["items"]
    assert "token" not in listed[-1]
    assert "token_hash" not in listed[-1]
    headers = {"Authorization": f"Bearer {secret}"}
    assert (await api.http.get("/api/v1/jobs", headers=headers)).status_code == 200
    assert (await api.delete("/api/v1/tokens/ci", scope="admin")).status_code == 204
    assert_problem(await api.http.get("/api/v1/jobs", headers=headers), 401)
    assert_problem(await api.delete("/api/v1/tokens/ci", scope="admin"), 404)
    assert_problem(await api.post("/api/v1/tokens", scope="admin",
                                  json={"name": "x", "scope": "root"}), 422)


async def test_cookie_session_needs_the_csrf_header(api: Api) -> None:
    r = await api.http.post("/api/v1/session", json={"token": api.tokens["write"]})
    assert r.status_code == 200, r.text
    session = r.headers.get_list("set-cookie")
    assert any("tw_session=" in c and "HttpOnly" in c and "SameSite=strict" in c.replace(
        "Strict", "strict") for c in session)
    assert (await api.http.get("/api/v1/jobs")).status_code == 200  # the cookie is enough
    assert_problem(await api.http.post("/api/v1/jobs", json=DOC), 403)  # no CSRF header
    bad = await api.http.post("/api/v1/jobs", json=DOC, headers={"X-CSRF-Token": "guess"})
    assert_problem(bad, 403)
    csrf = api.http.cookies["tw_csrf"]
    cross = await api.http.post("/api/v1/jobs", json=DOC, headers={
        "X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"})
    assert_problem(cross, 403)
    ok = await api.http.post("/api/v1/jobs", json=DOC, headers={"X-CSRF-Token": csrf})
    assert ok.status_code == 201, ok.text
    assert (await api.http.request("DELETE", "/api/v1/session")).status_code == 204
    api.http.cookies.delete("tw_session")
    assert_problem(await api.http.get("/api/v1/jobs"), 401)


async def test_bad_sign_in_is_401(api: Api) -> None:
    assert_problem(await api.http.post("/api/v1/session", json={"token": "tw_wrong"}), 401)
    assert (await api.http.get("/api/v1/session")).json()["authenticated"] is False


async def test_open_access_on_loopback(tmp_path: Path) -> None:
    api, store = await open_api(tmp_path, open_access=True)
    try:
        assert (await api.http.get("/api/v1/jobs")).status_code == 200
        assert (await api.http.post("/api/v1/jobs", json=DOC)).status_code == 201
        assert (await api.http.get("/api/v1/session")).json()["open"] is True
        cross = await api.http.post("/api/v1/jobs/nightly/trigger",
                                    headers={"Origin": "https://evil.example"})
        assert_problem(cross, 403)
        rebinding = await api.http.get("/api/v1/jobs", headers={"Host": "evil.example"})
        assert_problem(rebinding, 403)
    finally:
        await api.http.aclose()
        await store.close()


def test_tokens_cli_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--database", f"sqlite:///{tmp_path}/cli.db"]
    assert main(["tokens", "create", "--name", "deploy", "--scope", "write", *db]) == 0
    out = capsys.readouterr().out
    secret = next(word for word in out.split() if word.startswith("tw_"))
    assert main(["tokens", "list", "--json", *db]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(t["name"], t["scope"]) for t in listed] == [("deploy", "write")]
    assert secret not in json.dumps(listed)
    assert main(["tokens", "create", "--name", "deploy", "--scope", "read", *db]) == 2
    assert "already named" in capsys.readouterr().err
    assert main(["tokens", "revoke", "deploy", *db]) == 0
    assert main(["tokens", "revoke", "deploy", *db]) == 2


async def test_tokens_are_stored_hashed(tmp_path: Path) -> None:
    api, store = await open_api(tmp_path)
    await api.http.aclose()
    await store.close()
    raw = (tmp_path / "api.db").read_bytes() + b"".join(
        p.read_bytes() for p in tmp_path.glob("api.db-*"))
    for secret in api.tokens.values():
        assert secret.encode() not in raw
    assert isinstance(store, SqliteStore)


def test_open_refused_off_loopback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["api", "--open", "--host", "0.0.0.0", "--database",
                 f"sqlite:///{tmp_path}/x.db"])
    assert code == 2
    assert "loopback" in capsys.readouterr().err


