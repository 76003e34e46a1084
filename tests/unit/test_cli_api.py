"""``--api URL --token T``: the job, run and queue commands through a real REST API server
(uvicorn on a free port, in a thread of its own, on a SQLite file) print what they print on
the database, and exit with the same statuses; the API's errors are one line each."""

from __future__ import annotations

import asyncio
import io
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tickwork.cli.main import main
from tickwork.config import load_settings

PY_JOB = {"name": "hello", "schedule": {"every": "10s"}, "kind": "python",
          "payload": {"callable": "tickwork.cli.demo:tick", "args": ["x"]},
          "timeout_seconds": 5, "retry": {"max_attempts": 1}}
MORE = [{**PY_JOB, "name": "job-1", "tags": ["more"]}, {**PY_JOB, "name": "job-2",
                                                        "queue": "mail"}]


class ApiThread:
    """``tickwork api`` as the tests need it: the app served by uvicorn on 127.0.0.1:0,
    with its own event loop in a thread, so the CLI's asyncio.run works beside it."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.url = ""
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="api", daemon=True)

    def __enter__(self) -> ApiThread:
        self._thread.start()
        assert self._ready.wait(20), "the API did not start"
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *_: object) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        from tickwork.api.app import create_app
        from tickwork.api.server import ApiServer
        from tickwork.runtime.client import client_for

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            settings = load_settings(flags={"database": self.database}, env={})
            client = await client_for(settings, create=False)
            server = ApiServer(create_app(client), host="127.0.0.1", port=0)
            await server.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            raise
        self.url = server.url
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await server.stop()
            await client.close()


@pytest.fixture
def tw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    for key in [k for k in __import__("os").environ if k.startswith("TICKWORK_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)

    def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin or ""))
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def new_database(tw: Any, path: Path) -> tuple[str, dict[str, str]]:
    """A migrated SQLite file and a token of each scope on it."""
    url = f"sqlite:///{path}"
    assert tw("migrate", "--database", url)[0] == 0
    tokens = {}
    for scope in ("read", "write", "admin"):
        code, out, err = tw("tokens", "create", "--name", f"cli-{scope}", "--scope", scope,
                            "--database", url)
        assert code == 0, err
        tokens[scope] = out.splitlines()[-1]
    return url, tokens


@pytest.fixture
def api(tw: Any, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    url, tokens = new_database(tw, tmp_path / "served.db")
    with ApiThread(url) as server:
        yield server.url, tokens


ICS = ("BEGIN:VCALENDAR\nBEGIN:VEVENT\nSUMMARY:Xmas\nDTSTART;VALUE=DATE:20301225\n"
       "RRULE:FREQ=YEARLY\nEND:VEVENT\nEND:VCALENDAR\n")
DAILY = {"name": "daily", "kind": "http", "payload": {"url": "https://example.org/"},
         "schedule": {"cron": "0 9 * * *", "exclude": ["weekend"]}}
GOOD: list[tuple[tuple[str, ...], Any]] = [
    (("jobs", "create", "--json", "-"), PY_JOB),
    (("jobs", "create", "--json", "-"), MORE),
    (("jobs", "list"), None),
    (("jobs", "list", "--json"), None),
    (("jobs", "list", "--queue", "mail", "--json"), None),
    (("jobs", "list", "--tag", "more"), None),
    (("jobs", "list", "--search", "JOB", "--limit", "1"), None),
    (("jobs", "list", "--after", "hello", "--json"), None),
    (("jobs", "show", "hello"), None),
    (("jobs", "show", "hello", "--next", "3", "--json"), None),
    (("jobs", "show", "hello", "--next", "150", "--json"), None),
    (("jobs", "pause", "hello"), None),
    (("jobs", "list", "--paused"), None),
    (("jobs", "resume", "hello", "--json"), None),
    (("jobs", "list", "--active", "--json"), None),
    (("jobs", "update", "hello", "--json", "-"), {"tags": ["night"], "priority": 5}),
    (("jobs", "trigger", "hello"), None),
    (("jobs", "trigger", "job-1", "--json"), None),
    (("runs", "list"), None),
    (("runs", "list", "--json", "--oldest-first"), None),
    (("runs", "list", "--job", "hello", "--state", "scheduled", "--limit", "1", "--json"), None),
    # run control on job-1's triggered run ({run}: its scheduled_at in this session)
    (("runs", "cancel", "job-1", "{run}"), None),
    (("runs", "show", "job-1", "{run}"), None),
    (("runs", "retry", "job-1", "{run}", "--json"), None),
    (("runs", "cancel", "job-1", "{run}", "--json"), None),
    (("runs", "show", "job-1", "{run}", "--json"), None),
    (("jobs", "audit", "hello"), None),
    (("jobs", "audit", "job-1", "--json"), None),
    (("jobs", "audit", "hello", "--after", "1", "--limit", "2", "--json"), None),
    (("audit", "list"), None),
    (("audit", "list", "--since", "2000-01-01T00:00:00Z", "--limit", "3", "--json"), None),
    (("audit", "list", "--after", "4", "--json"), None),
    (("alerts", "list"), None),
    (("alerts", "list", "--job", "hello", "--state", "firing", "--json"), None),
    (("queues", "list", "--json"), None),
    (("queues", "pause", "mail"), None),
    (("queues", "list"), None),
    (("queues", "resume", "mail", "--json"), None),
    (("queues", "set", "mail", "--max-running", "3", "--rate", "5/s", "--burst", "2"), None),
    (("queues", "list", "--json"), None),
    (("queues", "set", "mail", "--json"), None),
    (("limits", "set", "gh", "--rate", "100/min", "--json"), None),
    (("limits", "set", "gh", "--rate", "5/s", "--burst", "3"), None),
    (("limits", "list"), None),
    (("limits", "list", "--json"), None),
    (("limits", "delete", "gh"), None),
    (("jobs", "delete", "job-2"), None),
    (("jobs", "list", "--json"), None),
    (("calendars", "create", "weekend", "--weekly", "Sat-Sun", "--description", "off"), None),
    (("calendars", "create", "days", "--date", "2040-01-02", "--range",
      "2040-08-01..2040-08-15", "--yearly", "12-25"), None),
    (("calendars", "import", "xmas.ics"), None),
    (("calendars", "import", "xmas.ics", "--name", "xmas", "--replace"), None),
    (("calendars", "list"), None),
    (("calendars", "list", "--json"), None),
    (("jobs", "create", "--json", "-"), DAILY),
    (("calendars", "show", "weekend"), None),
    (("calendars", "show", "days", "--json"), None),
    (("calendars", "update", "weekend", "--json", "-"), {"weekly": ["Sun"]}),
    (("jobs", "show", "daily", "--next", "8"), None),
    (("jobs", "show", "daily", "--next", "8", "--json"), None),
    (("calendars", "delete", "days"), None),
]
BAD: list[tuple[tuple[str, ...], Any]] = [
    # what the user gets wrong: the same status and the same one line either way
    (("jobs", "show", "job-2"), None),
    (("limits", "delete", "nosuch"), None),
    (("limits", "set", "a b", "--rate", "1/s"), None),
    (("queues", "set", "mail", "--rate", "5/x"), None),
    (("queues", "set", "mail", "--burst", "5"), None),
    (("queues", "set", "mail", "--max-running", "0"), None),
    (("jobs", "create", "--json", "-"), PY_JOB),
    (("jobs", "create", "--json", "-"), {**PY_JOB, "name": "x",
                                         "schedule": {"cron": "61 * * * *"}}),
    (("jobs", "update", "hello", "--json", "-"), {"priority": "high"}),
    (("jobs", "update", "hello", "--json", "-"), {"schedule": {"evry": 5}}),
    (("jobs", "update", "nosuch", "--json", "-"), {"priority": 1}),
    (("jobs", "pause", "nosuch"), None),
    (("runs", "list", "--job", "nosuch"), None),
    (("runs", "list", "--since", "yesterday"), None),
    (("runs", "show", "hello", "2030-01-01T00:00:00Z"), None),
    (("runs", "cancel", "hello", "2030-01-01T00:00:00Z"), None),
    (("runs", "cancel", "job-1", "{run}"), None),  # cancelled already: a conflict
    (("runs", "retry", "hello", "2030-01-01T00:00:00Z"), None),
    (("runs", "cancel", "nosuch", "2030-01-01T00:00:00Z"), None),
    (("runs", "retry", "hello", "yesterday"), None),
    (("jobs", "audit", "nosuch"), None),
    (("jobs", "audit", "hello", "--limit", "0"), None),
    (("audit", "list", "--since", "yesterday"), None),
    (("alerts", "list", "--job", "nosuch"), None),
    (("alerts", "list", "--limit", "501"), None),
    (("queues", "pause", "bad queue"), None),
    (("calendars", "delete", "weekend"), None),
    (("calendars", "show", "nosuch"), None),
    (("calendars", "create", "weekend"), None),
    (("calendars", "create", "x", "--range", "2040-01-01"), None),
    (("calendars", "create", "x", "--weekly", "Caturday"), None),
    (("calendars", "update", "nosuch", "--date", "2040-01-01"), None),
    (("jobs", "create", "--json", "-"), {**DAILY, "name": "d2",
                                         "schedule": {"cron": "0 9 * * *", "only": ["nope"]}}),
]
SESSION = GOOD + BAD


def normalised(text: str) -> str:
    text = re.sub(r"\b[0-9a-f]{32}\b", "<id>", text)
    # who changed a job: the OS user on the database, the token's name through the API
    text = re.sub(r'"(created|updated)_by": "[^"]*"', r'"\1_by": "<actor>"', text)
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<time>", text)


def test_every_command_says_the_same_through_the_api_as_on_the_database(
        tw: Any, tmp_path: Path, api: tuple[str, dict[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "xmas.ics").write_text(ICS)
    local = f"sqlite:///{tmp_path}/local.db"
    assert tw("migrate", "--database", local)[0] == 0
    url, tokens = api
    for variable in ("LOGNAME", "USER", "LNAME", "USERNAME"):  # the OS user, as the token's
        monkeypatch.setenv(variable, "cli-admin")                 # name: who acts reads alike
    seen: dict[str, list[tuple[int, str, str]]] = {"database": [], "api": []}
    for mode, extra in (("database", ("--database", local)),
                        ("api", ("--api", url, "--token", tokens["admin"]))):
        run_at = None
        for args, doc in SESSION:
            stdin = None if doc is None else json.dumps(doc)
            if "{run}" in args and run_at is None:  # job-1's triggered run, found once
                [run] = json.loads(tw("runs", "list", "--job", "job-1", *extra, "--json")[1])
                run_at = run["scheduled_at"]
            code, out, err = tw(*(run_at if a == "{run}" else a for a in args), *extra,
                                stdin=stdin)
            seen[mode].append((code, normalised(out), normalised(err)))
    for (args, _), there, here in zip(SESSION, seen["database"], seen["api"], strict=True):
        assert here == there, " ".join(args)
    statuses = [code for code, _, _ in seen["api"]]
    assert set(statuses[:len(GOOD)]) == {0}
    assert set(statuses[len(GOOD):]) == {2}
    for _, _, err in seen["api"][len(GOOD):]:
        assert err.startswith("tickwork: error: "), err
        assert err.count("\n") == 1, err
    # a run shown through the API, with its attempts, as on the database
    scheduled = json.loads(seen["api"][17][1].replace("<time>", "2030-01-01T00:00:00Z"))
    assert scheduled["trigger"] == "manual"
    monkeypatch.setenv("TICKWORK_API_URL", url)
    monkeypatch.setenv("TICKWORK_API_TOKEN", tokens["read"])
    [run] = json.loads(tw("runs", "list", "--job", "job-1", "--json")[1])
    code, out, err = tw("runs", "show", "job-1", run["scheduled_at"], "--json")
    assert code == 0, err
    assert json.loads(out)["attempts"] == []
    code, out, _ = tw("runs", "show", "job-1", run["scheduled_at"])
    assert out.startswith(f"job-1 @ {run['scheduled_at']}: cancelled, attempt 0 of 1")
    assert out.endswith("\nlast error: cancelled by cli-admin\n")  # the session cancelled it
    code, out, _ = tw("jobs", "audit", "job-1", "--json")
    assert [(e["action"], e["actor"]) for e in json.loads(out)] == [
        ("create", "cli-admin"), ("trigger", "cli-admin"), ("cancel", "cli-admin"),
        ("retry", "cli-admin"), ("cancel", "cli-admin")]


def test_the_variables_choose_the_api_and_a_database_flag_wins_over_them(
        tw: Any, tmp_path: Path, api: tuple[str, dict[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    url, tokens = api
    monkeypatch.setenv("TICKWORK_API_URL", url)
    monkeypatch.setenv("TICKWORK_API_TOKEN", tokens["write"])
    assert tw("jobs", "create", "--json", "-", stdin=json.dumps(PY_JOB))[0] == 0
    assert [j["name"] for j in json.loads(tw("jobs", "list", "--json")[1])] == ["hello"]
    other = f"sqlite:///{tmp_path}/other.db"
    assert tw("migrate", "--database", other)[0] == 0  # the API variables are not settings
    assert json.loads(tw("jobs", "list", "--json", "--database", other)[1]) == []
    code, _, err = tw("jobs", "list", "--api", url, "--database", other)
    assert (code, err) == (2, "tickwork: error: --api: give --api or --database, not both\n")


def test_a_bulk_create_through_the_api_is_all_or_none(tw: Any,
                                                     api: tuple[str, dict[str, str]]) -> None:
    url, tokens = api
    flags = ("--api", url, "--token", tokens["write"])
    docs = [{**PY_JOB, "name": "first"}, {**PY_JOB, "name": "first"}]
    code, _, err = tw("jobs", "create", "--json", "-", *flags, stdin=json.dumps(docs))
    assert (code, err) == (2, "tickwork: error: a job named 'first' already exists\n")
    assert json.loads(tw("jobs", "list", "--json", *flags)[1]) == []
    many = [{**PY_JOB, "name": f"job-{i:03}"} for i in range(120)]
    assert tw("jobs", "create", "--json", "-", *flags, stdin=json.dumps(many)) == (
        0, "created 120 jobs\n", "")
    listed = json.loads(tw("jobs", "list", "--json", "--limit", "1000", *flags)[1])
    assert len(listed) == 120


@pytest.mark.parametrize(("token", "args", "expected"), [
    ("tw_not-a-token", ("jobs", "list"),
     "tickwork: error: --token: the API at {url}/api/v1 refused the token: "),
    ("read", ("jobs", "pause", "hello"), "tickwork: error: --token: "),
    ("write", ("queues", "pause", "default"), "tickwork: error: --token: "),
    (None, ("jobs", "list"), "tickwork: error: --token: --api needs an API token: pass "
     "--token or set TICKWORK_API_TOKEN (tickwork tokens create makes one)\n"),
])
def test_a_token_that_does_not_do_is_one_line_naming_it(
        tw: Any, api: tuple[str, dict[str, str]], token: str | None, args: tuple[str, ...],
        expected: str) -> None:
    url, tokens = api
    assert tw("jobs", "create", "--json", "-", "--api", url, "--token", tokens["write"],
              stdin=json.dumps(PY_JOB))[0] == 0
    given = () if token is None else ("--token", tokens.get(token, token))
    code, out, err = tw(*args, "--api", url, *given)
    assert (code, out) == (2, "")
    assert err.startswith(expected.format(url=url)), err
    assert err.count("\n") == 1


def test_an_api_that_cannot_be_reached_is_status_1(tw: Any) -> None:
    code, out, err = tw("jobs", "list", "--api", "http://127.0.0.1:1", "--token", "tw_x")
    assert (code, out) == (1, "")
    assert err.startswith("tickwork: error: cannot reach the API at http://127.0.0.1:1/api/v1: ")
    assert err.count("\n") == 1


def test_a_url_that_is_not_the_api_is_status_1(tw: Any, api: tuple[str, dict[str, str]]) -> None:
    url, tokens = api
    code, _, err = tw("jobs", "list", "--api", f"{url}/elsewhere", "--token", tokens["read"])
    assert code == 1
    assert err == (f"tickwork: error: {url}/elsewhere/api/v1 did not answer as tickwork's API "
                   "does (GET /elsewhere/api/v1/jobs: 404 Not Found)\n")


def test_a_redirect_is_named_not_followed(tw: Any) -> None:
    """An http:// address that a proxy sends to https:// says where it points: the token
    is not sent on to another address."""
    import httpx

    from tickwork.cli.remote import ApiUnreachable, RemoteClient

    def moved(request: httpx.Request) -> httpx.Response:
        return httpx.Response(301, headers={"Location": "https://tickwork.example.org/api/v1/jobs"})

    async def list_jobs() -> None:
        client = RemoteClient("http://tickwork.example.org", "tw_x",
                              transport=httpx.MockTransport(moved))
        try:
            await client.list_jobs()
        finally:
            await client.close()

    with pytest.raises(ApiUnreachable) as raised:
        asyncio.run(list_jobs())
    assert str(raised.value) == (
        "http://tickwork.example.org/api/v1 did not answer as tickwork's API does (GET "
        "/api/v1/jobs: 301 Moved Permanently; it points to "
        "https://tickwork.example.org/api/v1/jobs)")


def test_redis_is_the_servers_business_with_api(tw: Any) -> None:
    code, _, err = tw("jobs", "trigger", "x", "--api", "http://127.0.0.1:1", "--token", "tw_x",
                      "--redis", "redis://127.0.0.1:6379/0")
    assert (code, err) == (2, "tickwork: error: --redis: is the server's business with --api: "
                              "the API process feeds Redis itself\n")


@pytest.mark.parametrize(("api_url", "message"), [
    ("ftp://example.org", "--api: must be an http:// or https:// URL (got 'ftp://example.org')"),
    ("example.org:8000", "--api: must be an http:// or https:// URL (got 'example.org:8000')"),
    ("http://example.org/?x=1", "--api: must be a URL without ?query or #fragment"),
])
def test_a_bad_api_url_is_bad_input(tw: Any, api_url: str, message: str) -> None:
    assert tw("jobs", "list", "--api", api_url, "--token", "tw_x") == (
        2, "", f"tickwork: error: {message}\n")


TOKEN_SESSION: list[tuple[str, ...]] = [
    ("tokens", "create", "--name", "deploy", "--scope", "write"),
    ("tokens", "create", "--name", "acme-ci", "--scope", "read", "--namespace", "acme"),
    ("tokens", "list"),
    ("tokens", "list", "--json"),
    ("tokens", "revoke", "deploy"),
    ("tokens", "revoke", "{acme-ci}"),  # by its id
    ("tokens", "list", "--json"),
    # what the user gets wrong: status 2 and the same one line either way
    ("tokens", "revoke", "deploy"),
    ("tokens", "revoke", "nosuch"),
    ("tokens", "create", "--name", "cli-read", "--scope", "read"),
    ("tokens", "create", "--name", " ", "--scope", "read"),
    ("tokens", "create", "--name", "x", "--scope", "read", "--namespace", "Not One"),
]


def test_tokens_say_the_same_through_the_api_as_on_the_database(
        tw: Any, tmp_path: Path, api: tuple[str, dict[str, str]]) -> None:
    url, tokens = api
    local, local_tokens = new_database(tw, tmp_path / "local.db")
    with ApiThread(local) as other:  # its admin token used once, as the API's will be
        assert tw("tokens", "list", "--api", other.url, "--token", local_tokens["admin"])[0] == 0
    seen: dict[str, list[tuple[int, str, str]]] = {"database": [], "api": []}
    for mode, extra in (("database", ("--database", local)),
                        ("api", ("--api", url, "--token", tokens["admin"]))):
        for args in TOKEN_SESSION:
            ref = "{acme-ci}"
            if ref in args:
                listed = json.loads(tw("tokens", "list", "--json", *extra)[1])
                [ref] = [t["id"] for t in listed if t["name"] == "acme-ci"]
            code, out, err = tw(*(ref if a == "{acme-ci}" else a for a in args), *extra)
            seen[mode].append((code, token_normalised(out), token_normalised(err)))
    for args, there, here in zip(TOKEN_SESSION, seen["database"], seen["api"], strict=True):
        assert here == there, " ".join(args)
    assert [code for code, _, _ in seen["api"]] == [0] * 7 + [2] * 5
    created = seen["api"][0][1]
    assert created == ("created token 'deploy' (<tok>, scope write); it is shown only this "
                       "once:\n<secret>\n")
    listed = json.loads(seen["api"][6][1])
    assert [(t["name"], t["scope"], t["namespace"], t["revoked_at"]) for t in listed] == [
        ("cli-read", "read", None, None), ("cli-write", "write", None, None),
        ("cli-admin", "admin", None, None), ("deploy", "write", None, "<time>"),
        ("acme-ci", "read", "acme", "<time>")]
    for _, _, err in seen["api"][7:]:
        assert err.startswith("tickwork: error: "), err
        assert err.count("\n") == 1, err
    # the revoked token is refused from now on, and a non-admin token may not manage tokens
    code, _, err = tw("tokens", "list", "--api", url, "--token", tokens["write"])
    assert code == 2
    assert err.startswith("tickwork: error: --token: "), err


def token_normalised(text: str) -> str:
    text = re.sub(r"\btok_[0-9a-f]{12}\b", "<tok>", text)
    text = re.sub(r"\btw_[A-Za-z0-9_-]{43}\b", "<secret>", text)
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<time>", text)
