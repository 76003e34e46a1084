"""Text that is not valid Unicode (a lone surrogate such as the JSON escape \\ud800, or bytes
that are not UTF-8) is bad input everywhere: 422 naming the field in the API, exit 2 with one
line in the CLI, a ValidationError from the Python client. Never a 500 or a traceback."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_api import Api, assert_problem, open_api
from test_cli import tw  # noqa: F401  (the CLI fixture)

from tickwork.api.urls import UrlText
from tickwork.document import parse_job_document
from tickwork.errors import ValidationError

LONE = "\\ud800"  # as JSON text: the escape that decodes to a lone surrogate
JOB = ('{"name": %s, "schedule": {"every": "1h"}, "kind": "http", '
       '"payload": {"url": "https://example.org/", "body": %s}}')


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    a, store = await open_api(tmp_path)
    yield a
    await a.http.aclose()
    await store.close()


async def send(api: Api, method: str, url: str, text: str, *,
               scope: str = "admin") -> Any:
    return await api.http.request(method, url, content=text.encode(), headers={
        **api.auth(scope), "Content-Type": "application/json"})


def assert_field(response: Any, field: str) -> None:
    body = assert_problem(response, 422)
    assert body["errors"][0]["field"] == field, body
    assert "valid Unicode" in body["detail"] or "UTF-8" in body["detail"], body


@pytest.mark.parametrize(("method", "url", "text", "field"), [
    ("POST", "/api/v1/jobs", JOB % (f'"{LONE}"', "1"), "name"),
    ("POST", "/api/v1/jobs", JOB % ('"a"', f'"x{LONE}"'), "payload.body"),
    ("POST", "/api/v1/jobs", JOB % ('"a"', f'{{"k{LONE}": 1}}'), "payload.body"),
    ("POST", "/api/v1/jobs", "[" + JOB % ('"a"', f'[1, "{LONE}"]') + "]", "[0].payload.body[1]"),
    ("POST", "/api/v1/jobs", "[" + JOB % ('"a"', "1") + ", " + (JOB % ('"b"', "1")).replace(
        '"1h"', f'"1h{LONE}"') + "]", "[1].schedule.every"),
    ("POST", "/api/v1/preview",
     f'{{"schedule": {{"cron": "0 * * * *", "timezone": "Europe/{LONE}"}}}}',
     "schedule.timezone"),
    ("POST", "/api/v1/preview", f'{{"schedule": {{"every": "1h"}}, "after": "{LONE}"}}',
     "after"),
    ("PATCH", "/api/v1/jobs/existing", f'{{"tags": ["{LONE}"]}}', "tags[0]"),
    ("PATCH", "/api/v1/jobs/existing", '{"name": "\\udfff"}', "name"),
    ("POST", "/api/v1/jobs/existing/backfill", f'{{"from": "{LONE}", "to": "x"}}', "from"),
])
async def test_bodies_answer_422_naming_the_field(api: Api, method: str, url: str, text: str,
                                                  field: str) -> None:
    assert (await send(api, "POST", "/api/v1/jobs", JOB % ('"existing"', "1"))).status_code == 201
    assert_field(await send(api, method, url, text), field)


async def test_a_valid_surrogate_pair_is_text(api: Api) -> None:
    pair = "\\ud83d\\ude00"
    r = await send(api, "POST", "/api/v1/jobs", JOB % (f'"smile {pair}"', f'"{pair}"'))
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "smile \U0001f600"


async def test_session_needs_no_token_and_answers_422(api: Api) -> None:
    for token in (LONE, f"tw_{LONE}"):
        r = await api.http.post("/api/v1/session", content=f'{{"token": "{token}"}}'.encode(),
                                headers={"Content-Type": "application/json"})
        assert_field(r, "token")


async def test_query_and_path_parameters(api: Api) -> None:
    cursor = base64.urlsafe_b64encode(json.dumps(["\ud800"]).encode()).decode().rstrip("=")
    for url in ("/api/v1/jobs", "/api/v1/runs"):
        assert_problem(await api.get(url, params={"cursor": cursor}), 422)
    assert_field(await api.get("/api/v1/jobs?name=%ED%A0%80"), "name")
    assert_field(await api.get("/api/v1/runs?limit=1&job=a%FFb"), "job")
    assert_field(await api.get("/api/v1/jobs?%ED%A0%80=1"), "query")
    assert_field(await api.get("/api/v1/jobs/%ED%A0%80"), "path")
    assert_field(await api.get("/api/v1/jobs/x%ff/status"), "path")
    assert (await api.get("/api/v1/jobs?name=%C3%A9+x")).status_code == 200  # "é x" is text


async def test_a_server_that_hands_over_a_surrogate_path(api: Api) -> None:
    """A server that decodes the path with surrogateescape: refused before routing."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send_message(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(*_: Any) -> None:
        raise AssertionError("routed")

    scope = {"type": "http", "method": "GET", "path": "/api/v1/jobs/\udced", "query_string": b"",
             "headers": []}
    await UrlText(app)(scope, receive, send_message)
    assert sent[0]["status"] == 422
    assert json.loads(sent[1]["body"])["errors"][0]["field"] == "path"


def test_the_python_client_gets_a_validation_error() -> None:
    doc = {"name": "a", "schedule": {"cron": "0 * * * *", "timezone": "\ud800"},
           "kind": "http", "payload": {"url": "https://example.org/"}}
    with pytest.raises(ValidationError, match=r"lone surrogate U\+D800") as caught:
        parse_job_document(doc)
    assert caught.value.field == "schedule.timezone"
    for field, value in (("name", "a\udc80"), ("queue", "\udfff"), ("tags", ["\ud800"])):
        with pytest.raises(ValidationError, match=r"valid Unicode|letters"):
            parse_job_document({**doc, "schedule": {"every": "1h"}, field: value})


async def test_client_lookups_are_validation_errors(api: Api) -> None:
    """Not an encoding error from the driver: every lookup by name and every listing filter."""
    client = api.client
    lookups = [client.get_job("\ud800"), client.pause_job("x\udc00"), client.trigger_job("\udfff"),
               client.list_jobs(tag="\ud800"), client.list_jobs(name_contains="a\udc80"),
               client.list_runs(job="\ud800")]
    for lookup in lookups:
        with pytest.raises(ValidationError, match=r"lone surrogate"):
            await lookup


@pytest.mark.parametrize(("stdin", "field"), [
    (JOB % (f'"{LONE}"', "1"), "name"),
    (JOB % ('"a"', '{"\\udc00": 1}'), "payload.body"),
    (JOB % ('"a"', "1") + "\n" + JOB % ('"b"', f'"{LONE}"'), "[1].payload.body"),
])
def test_cli_create_exits_2_with_one_line(tw: Any, stdin: str, field: str) -> None:  # noqa: F811
    code, _, err = tw("jobs", "create", "--json", "-", stdin=stdin)
    assert code == 2
    assert err.startswith(f"tickwork: error: {field}: ")
    assert "must be valid Unicode text" in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_cli_update_file_and_arguments(tw: Any, tmp_path: Path) -> None:  # noqa: F811
    assert tw("jobs", "create", "--json", "-", stdin=JOB % ('"a"', "1"))[0] == 0
    code, _, err = tw("jobs", "update", "a", "--json", "-", stdin=f'{{"tags": ["{LONE}"]}}')
    assert (code, err.splitlines()[0][:33]) == (2, "tickwork: error: tags[0]: must be")
    (tmp_path / "bad.json").write_bytes(b'{"name": "\xff"}')
    code, _, err = tw("jobs", "create", "--json", str(tmp_path / "bad.json"))
    assert code == 2
    assert "bad.json is not UTF-8 text (byte 11)" in err
    for args in (("jobs", "show", "\udcff"), ("jobs", "list", "--search", "\udced\udca0\udc80")):
        code, _, err = tw(*args)
        assert code == 2
        assert err.startswith("tickwork: error: argument ")
        assert "not valid UTF-8" in err
        assert err.count("\n") == 1
