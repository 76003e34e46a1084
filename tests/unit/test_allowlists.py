"""A write token is not a shell: every way a job document could reach the host is refused.

Each case is tried where it is checked: when the job is created (422 on the API, exit status 2
on the CLI, ValidationError on the client) and again by the executor before it runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.cli.demo import DEMO_JOBS
from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.config import Settings
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import ConfigError, ValidationError
from tickwork.executors import ExecutorSettings, validate_payload
from tickwork.executors.admission import JobPolicy
from tickwork.executors.python import PythonExecutor
from tickwork.executors.shell import ShellExecutor
from tickwork.metrics import Metrics
from tickwork.outcomes import Fail, Success
from tickwork.runtime.embedded import EmbeddedService
from tickwork.testing.jobs import SCHEDULED_AT, make_context

PY = sys.executable
DEMO = ExecutorSettings(python_allowed_modules=("tickwork.cli.demo",))
TESTING = ExecutorSettings(python_allowed_modules=("tickwork.testing.jobs",))

# Attribute paths that walk out of an allowed module into what it imported.
ESCAPES = [
    "tickwork.cli.demo:platform.os.system",
    "tickwork.cli.demo:platform.os.getenv",
    "tickwork.cli.demo:platform.node",          # a function, but of another module
    "tickwork.cli.demo:Fail",                   # a class imported from tickwork.errors
    "tickwork.cli.demo:ExecutionContext",       # imported from tickwork.executors.base
]


async def run_python(target: str, args: list[Any], settings: ExecutorSettings = DEMO) -> Any:
    executor = PythonExecutor(settings)
    try:
        return await executor.execute(make_context("python", {"callable": target, "args": args}))
    finally:
        await executor.close()


@pytest.mark.parametrize("target", ESCAPES)
async def test_an_attribute_path_never_leaves_the_allowed_module(target: str,
                                                                 tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    outcome = await run_python(target, [f"touch {marker}"])
    assert isinstance(outcome, Fail), outcome
    assert not outcome.retriable
    assert not marker.exists()


async def test_the_secret_key_cannot_be_read_through_an_import(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWORK_SECRET_KEY", "do-not-leak")
    outcome = await run_python("tickwork.cli.demo:platform.os.getenv", ["TICKWORK_SECRET_KEY"])
    assert isinstance(outcome, Fail)
    assert "do-not-leak" not in outcome.error
    assert "steps into module 'platform'" in outcome.error


@pytest.mark.parametrize("target", [
    "tickwork.cli.demo:tick.__globals__",
    "tickwork.cli.demo:tick.__call__",
    "tickwork.cli.demo:__builtins__",
    "tickwork.cli.demo:Namespace.__init__",
])
def test_dunders_are_refused_in_the_document(target: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_payload("python", {"callable": target})
    assert caught.value.field == "payload.callable"
    assert "dunder" in caught.value.reason


async def test_functions_classes_and_methods_of_the_module_still_run() -> None:
    assert await run_python("tickwork.cli.demo:tick", ["x"]) == Success(output="tick x")
    shout = await run_python("tickwork.testing.jobs:Namespace.shout", ["hi"], TESTING)
    assert shout == Success(output="HI")


# --- refused when the job is created ------------------------------------------------------------


def python_doc(target: str, name: str = "p") -> dict[str, Any]:
    return {"name": name, "schedule": {"every": "1m"}, "kind": "python",
            "payload": {"callable": target, "args": ["id"]}}


@pytest.fixture
async def client(tmp_path: Path) -> Any:
    store = SqliteStore(f"sqlite:///{tmp_path}/a.db")
    await store.migrate()
    client = AsyncClient(store, clock=FakeClock(SCHEDULED_AT),
                         policy=JobPolicy(DEMO, runs_jobs=True))
    yield client
    await store.close()


@pytest.mark.parametrize("target", ESCAPES)
async def test_the_client_refuses_an_escape_at_creation(client: AsyncClient, target: str) -> None:
    with pytest.raises(ValidationError) as caught:
        await client.create_job(python_doc(target))
    assert caught.value.field == "payload.callable"
    with pytest.raises(ValidationError) as bulk:
        await client.create_jobs([python_doc("tickwork.cli.demo:tick", "ok"),
                                  python_doc(target, "bad")])
    assert bulk.value.field == "[1].payload.callable"
    assert await client.list_jobs() == []


async def test_the_client_refuses_an_escape_in_an_update(client: AsyncClient) -> None:
    await client.create_job(python_doc("tickwork.cli.demo:tick"))
    with pytest.raises(ValidationError, match=r"payload\.callable"):
        await client.update_job("p", {"payload": {"callable": "tickwork.cli.demo:platform.system"}})
    assert (await client.get_job("p")).spec.payload["callable"] == "tickwork.cli.demo:tick"


async def test_the_api_answers_422_naming_the_field(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/api.db")
    await store.migrate()
    client = AsyncClient(store, clock=FakeClock(SCHEDULED_AT),
                         policy=JobPolicy(DEMO, runs_jobs=True))
    token, _ = await create_token(client, "w", "write")
    app = create_app(client, metrics=Metrics())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1:8000") as http:
        r = await http.post("/api/v1/jobs", json=python_doc("tickwork.cli.demo:platform.os.system"),
                            headers={"Authorization": f"Bearer {token}"})
    await store.close()
    assert r.status_code == 422, r.text
    assert "payload.callable" in r.json()["detail"]


def test_the_cli_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "tickwork.toml"
    config.write_text('[executors]\npython_allowed_modules = ["tickwork.cli.demo"]\n')
    doc = json.dumps(python_doc("tickwork.cli.demo:platform.os.system"))
    done = subprocess.run(
        [str(Path(PY).parent / "tickwork"), "jobs", "create", "--json", "-",
         "--config", str(config), "--database", f"sqlite:///{tmp_path}/c.db"],
        input=doc, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("tickwork: error: [0].payload.callable: "), done.stderr
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


async def test_a_process_without_an_allowlist_leaves_the_module_to_the_workers(
        tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/n.db")
    await store.migrate()
    client = AsyncClient(store, policy=JobPolicy(ExecutorSettings(), runs_jobs=False))
    try:
        await client.create_job(python_doc("myapp.jobs:refresh"))  # workers may allow it
        with pytest.raises(ValidationError):  # never a valid callable, allowlist or not
            await client.create_job(python_doc("tickwork.cli.demo:tick.__globals__", "d"))
    finally:
        await store.close()


async def test_the_demo_module_is_allowed_only_with_the_demo_jobs(tmp_path: Path) -> None:
    for demo in (False, True):
        service = EmbeddedService(Settings(database=f"sqlite:///{tmp_path}/{demo}.db",
                                           api_enabled=False),
                                  jobs=DEMO_JOBS if demo else ())
        await service.start()
        try:
            allowed = service.executor_settings.python_allowed_modules
            assert ("tickwork.cli.demo" in allowed) is demo
            assert service.client is not None
            if not demo:
                with pytest.raises(ValidationError, match=r"'tickwork\.cli\.demo' is not allowed"):
                    await service.client.create_job(python_doc("tickwork.cli.demo:tick"))
        finally:
            await service.stop()


# --- shell: environment, working directory, arguments -----------------------------------------


SHELL = ExecutorSettings(shell_enabled=True, shell_allowed_executables=(PY, "/bin/echo"),
                         shell_allowed_arguments=(f"{PY}=-c", f"{PY}=print\\(\\d+\\)"),
                         shell_allowed_env=("REGION", "APP_*"), shell_allowed_cwd=("/tmp",))


async def run_shell(payload: dict[str, Any], settings: ExecutorSettings = SHELL) -> Any:
    executor = ShellExecutor(settings)
    return await executor.execute(make_context("shell", payload))


@pytest.mark.parametrize("name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "BASH_ENV", "ENV", "PATH",
                                  "PYTHONPATH", "PYTHONSTARTUP", "ld_preload", "NODE_OPTIONS",
                                  "PERL5OPT", "GIT_SSH_COMMAND", "BASH_FUNC_x%%", "HOME",
                                  "GLIBC_TUNABLES", "GCONV_PATH"])
async def test_loader_shell_and_interpreter_variables_are_refused(name: str) -> None:
    payload = {"command": ["/bin/echo", "hi"], "env": {name: "/tmp/evil"}}
    with pytest.raises(ValidationError) as caught:
        validate_payload("shell", payload)
    assert caught.value.field == f"payload.env.{name}"
    # and by a worker whose settings were built without the config's checks
    loose = ExecutorSettings(shell_enabled=True, shell_allowed_executables=("/bin/echo",),
                             shell_allowed_env=(name, "*"))
    outcome = await run_shell(payload, loose)
    assert isinstance(outcome, Fail)
    assert not outcome.retriable


async def test_a_variable_must_be_allowlisted() -> None:
    assert await run_shell({"command": ["/bin/echo", "hi"], "env": {"APP_MODE": "x",
                                                                    "REGION": "eu"}}) == \
        Success(output="hi\n")
    outcome = await run_shell({"command": ["/bin/echo", "hi"], "env": {"OTHER": "1"}})
    assert isinstance(outcome, Fail)
    assert "OTHER is not in shell_allowed_env" in outcome.error


@pytest.mark.parametrize("cwd", ["/", "/etc", "/tmp/../etc", "/tmpfoo"])
async def test_the_working_directory_must_be_allowlisted(cwd: str) -> None:
    outcome = await run_shell({"command": ["/bin/echo", "hi"], "cwd": cwd})
    assert isinstance(outcome, Fail), cwd
    assert "shell_allowed_cwd" in outcome.error


async def test_a_link_out_of_an_allowed_directory_is_refused(tmp_path: Path) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "out").symlink_to("/etc")
    settings = ExecutorSettings(shell_enabled=True, shell_allowed_executables=("/bin/echo",),
                                shell_allowed_cwd=(str(inside),))
    ok = await run_shell({"command": ["/bin/echo", "x"], "cwd": str(inside)}, settings)
    assert ok == Success(output="x\n")
    outcome = await run_shell({"command": ["/bin/echo", "x"], "cwd": str(inside / "out")},
                              settings)
    assert isinstance(outcome, Fail)


async def test_arguments_must_match_the_executables_patterns() -> None:
    assert await run_shell({"command": [PY, "-c", "print(42)"]}) == Success(output="42\n")
    outcome = await run_shell({"command": [PY, "-c", "import os; os.system('id')"]})
    assert isinstance(outcome, Fail)
    assert "argument 2" in outcome.error


@pytest.mark.parametrize("exe", ["/bin/sh", "/usr/bin/env", "/usr/bin/find", PY])
async def test_code_runners_need_argument_patterns(exe: str) -> None:
    loose = ExecutorSettings(shell_enabled=True, shell_allowed_executables=(exe,))
    outcome = await run_shell({"command": [exe, "-c", "id"]}, loose)
    assert isinstance(outcome, Fail)
    assert "runs code named in its arguments" in outcome.error
    with pytest.raises(ConfigError, match=r"executors\.shell_allowed_executables"):
        Settings(executors=loose).validate()


async def test_a_code_runner_behind_a_harmless_name_is_found(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    backup.symlink_to("/bin/sh")
    loose = ExecutorSettings(shell_enabled=True, shell_allowed_executables=(str(backup),))
    outcome = await run_shell({"command": [str(backup), "-c", "id"]}, loose)
    assert isinstance(outcome, Fail)
    assert "runs code named in its arguments" in outcome.error


@pytest.mark.parametrize(("setting", "value"), [
    ("shell_allowed_env", ("LD_*",)),
    ("shell_allowed_env", ("*",)),
    ("shell_allowed_env", ("PATH",)),
    ("shell_allowed_cwd", ("relative",)),
    ("shell_allowed_arguments", ("no-equals-sign",)),
    ("shell_allowed_arguments", ("x=(unclosed",)),
])
def test_the_config_refuses_unsafe_allowlists(setting: str, value: tuple[str, ...]) -> None:
    executors = ExecutorSettings(shell_enabled=True, shell_allowed_executables=("/bin/echo",),
                                 **{setting: value})
    with pytest.raises(ConfigError, match=f"executors.{setting}"):
        Settings(executors=executors).validate()


async def test_shell_refusals_come_at_creation_where_the_settings_are_known(
        tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/s.db")
    await store.migrate()
    runs = AsyncClient(store, policy=JobPolicy(SHELL, runs_jobs=True))
    off = AsyncClient(store, policy=JobPolicy(ExecutorSettings(), runs_jobs=True))
    elsewhere = AsyncClient(store, policy=JobPolicy(ExecutorSettings(), runs_jobs=False))

    def doc(name: str, **payload: Any) -> dict[str, Any]:
        return {"name": name, "schedule": {"every": "1m"}, "kind": "shell",
                "payload": {"command": ["/bin/echo", "hi"], **payload}}
    try:
        cases = [(runs, doc("a", env={"OTHER": "1"}), "payload.env.OTHER"),
                 (runs, doc("b", cwd="/etc"), "payload.cwd"),
                 (runs, doc("c", command=["/bin/cat", "/etc/shadow"]), "payload.command"),
                 (off, doc("d"), "kind")]
        for client, document, field in cases:
            with pytest.raises(ValidationError) as caught:
                await client.create_job(document)
            assert caught.value.field == field
        await elsewhere.create_job(doc("e"))  # its workers' settings are not known here
    finally:
        await store.close()


# --- schedules that never fire ---------------------------------------------------------------


async def test_a_job_that_would_never_run_is_refused(client: AsyncClient) -> None:
    now = SCHEDULED_AT
    long_ago = {"name": "old", "kind": "python", "payload": {"callable": "tickwork.cli.demo:tick"},
                "schedule": {"at": "2029-12-31T00:00:00Z"}}
    with pytest.raises(ValidationError, match=r"catchup_window_seconds \(3600\) in the past"):
        await client.create_job(long_ago)
    ended = {**long_ago, "name": "ended",
             "schedule": {"every": "1m", "end_at": "2030-01-01T00:00:00Z"}}
    with pytest.raises(ValidationError) as caught:
        await client.create_jobs([ended])
    assert caught.value.field == "[0].schedule"
    recent = {**long_ago, "name": "recent", "schedule": {"at": now.isoformat()}}
    assert (await client.create_job(recent)).next_run_at == now  # within the window: runs

