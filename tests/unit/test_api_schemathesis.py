"""A property-based run over the OpenAPI document: whatever schemathesis sends, no 5xx.

schemathesis sends only valid Unicode; a second run sends, to every operation, strings that
are not (lone surrogates: the JSON escape \\ud800 in bodies, their bytes percent-encoded in
paths and queries, inside cursors) and expects 4xx, never 5xx.

The app is built when the module loads (schemathesis reads the schema at collection), on a
SQLite file in a temporary directory that is removed at exit.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import json
import re
import shutil
import tempfile
from typing import Any
from urllib.parse import quote

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.client import AsyncClient
from tickwork.drivers.sqlite.store import SqliteStore

_DIR = tempfile.mkdtemp(prefix="tickwork-fuzz-")
atexit.register(shutil.rmtree, _DIR, True)
_STORE = SqliteStore(f"sqlite:///{_DIR}/fuzz.db")
_CLIENT = AsyncClient(_STORE)


async def _setup() -> str:
    await _STORE.migrate()
    await _CLIENT.create_job({"name": "existing", "schedule": {"every": "1h"}, "kind": "http",
                              "payload": {"url": "https://example.org/"}})
    return (await create_token(_CLIENT, "fuzz", "admin"))[0]


TOKEN = asyncio.run(_setup())
APP = create_app(_CLIENT)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: Any) -> None:
    response = case.call(headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code < 500, (case.method, case.formatted_path, response.text)


# -- strings that are not valid Unicode, everywhere ------------------------------------------

OPERATIONS = [(method.upper(), path, operation) for path, item in APP.openapi()["paths"].items()
              for method, operation in item.items()]
JOB = {"name": "fuzzed", "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Berlin"},
       "kind": "http", "payload": {"url": "https://example.org/", "headers": {"A": "b"},
                                   "body": {"k": ["v"]}}, "tags": ["t"], "queue": "q"}
BODIES: dict[str, Any] = {
    "/api/v1/jobs": JOB, "/api/v1/jobs/{ref}": JOB,
    "/api/v1/jobs/{ref}/backfill": {"from": "2030-01-01T00:00:00Z", "to": "2030-01-02T00:00:00Z"},
    "/api/v1/preview": {"schedule": JOB["schedule"], "after": "2030-01-01T00:00:00Z"},
    "/api/v1/tokens": {"name": "n", "scope": "read"}, "/api/v1/session": {"token": "tw_x"},
}
SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
# Text holding at least one lone surrogate (an adjacent high+low pair would be a valid one).
BAD_TEXT = st.tuples(st.text(max_size=4), SURROGATE, st.text(max_size=4)).map("".join).filter(
    lambda text: re.search("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])"
                           "[\udc00-\udfff]", text) is not None)
JSON_LEAVES = st.none() | st.booleans() | st.integers() | BAD_TEXT | st.text(max_size=4)
BAD_JSON = st.recursive(JSON_LEAVES, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(BAD_TEXT | st.text(max_size=4), inner, max_size=3),
                        max_leaves=8)


def _url_text(text: str) -> str:
    """Percent-encoded bytes of ``text``, the surrogates as the bytes UTF-8 refuses."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([text]).encode()).decode().rstrip("=")


@st.composite
def _with_bad_text(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with one string, one key, or one whole item replaced by bad text."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        if draw(st.integers(0, 4)) == 0:
            return {**value, draw(BAD_TEXT): value[key]}
        return {**value, key: draw(_with_bad_text(value[key]))}
    if isinstance(value, list) and value:
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], draw(_with_bad_text(value[index])), *value[index + 1:]]
    return draw(BAD_TEXT | BAD_JSON)


@st.composite
def _requests(draw: st.DrawFn) -> tuple[str, str, dict[str, str], str | None]:
    method, path, operation = draw(st.sampled_from(OPERATIONS))
    params = operation.get("parameters", [])
    bad = {p["name"] for p in params if draw(st.booleans())}
    url = path
    query: dict[str, str] = {}
    for param in params:
        text = draw(BAD_TEXT) if param["name"] in bad else "existing"
        if param["in"] == "path":
            url = url.replace("{" + param["name"] + "}", _url_text(text))
        elif param["name"] == "cursor":
            query["cursor"] = _cursor(text)
        elif param["name"] in bad:
            query[param["name"]] = _url_text(text)
    body = None
    if "requestBody" in operation:
        body = json.dumps(draw(_with_bad_text(BODIES.get(path, {}))))  # "\udXXX" escapes
    url += "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
    return method, url, query, body


@given(request=_requests())
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_for_text_that_is_not_unicode(
        request: tuple[str, str, dict[str, str], str | None]) -> None:
    method, url, _, body = request

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=APP),
                                     base_url="http://127.0.0.1:8000") as http:
            return await http.request(method, url, content=body, headers={
                "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})

    response = asyncio.run(call())
    assert response.status_code < 500, (method, url, body, response.text)
