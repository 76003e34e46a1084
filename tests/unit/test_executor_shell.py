"""The shell executor, with the test's own Python as the allowlisted executable."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tickwork.errors import ValidationError
from tickwork.executors import ExecutorSettings, validate_payload
from tickwork.executors.shell import DISABLED, ShellExecutor
from tickwork.outcomes import Fail, Success
from tickwork.testing.jobs import make_context

PY = sys.executable
# Python runs the code its arguments name, so it is allowlisted with a pattern for them.
ANY_ARGUMENTS = (f"{PY}=(?s).*",)
ENABLED = ExecutorSettings(shell_enabled=True, shell_allowed_executables=(PY,),
                           shell_allowed_arguments=ANY_ARGUMENTS,
                           shell_allowed_env=("REGION", "APP_*"), shell_allowed_cwd=("/tmp",))


async def run(command: Any, settings: ExecutorSettings = ENABLED, **extra: Any) -> Any:
    ex = ShellExecutor(settings)
    try:
        ctx = make_context("shell", {"command": command, **extra})
        return await asyncio.wait_for(ex.execute(ctx), 30)
    finally:
        await ex.close()


def py(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


# --- refusals ----------------------------------------------------------------------------


async def test_disabled_by_default() -> None:
    outcome = await run(py("print(1)"), settings=ExecutorSettings())
    assert outcome == Fail(
        "shell jobs are disabled; enable them in the config (shell_enabled) and allowlist "
        "the executable",
        retriable=False,
    )
    assert outcome.error == DISABLED


async def test_executable_not_allowlisted() -> None:
    outcome = await run(["/bin/echo", "hi"])
    assert outcome == Fail(
        "payload.command: executable '/bin/echo' is not in shell_allowed_executables; "
        "allowlist it in the config",
        retriable=False,
    )


async def test_enabled_with_empty_allowlist_refuses() -> None:
    outcome = await run(py("print(1)"), settings=ExecutorSettings(shell_enabled=True))
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert "is not in shell_allowed_executables" in outcome.error


async def test_bare_name_not_allowlisted_by_another_name() -> None:
    outcome = await run(["python3", "-c", "print(1)"])
    assert isinstance(outcome, Fail)
    assert not outcome.retriable


@pytest.mark.skipif(shutil.which("python3") is None, reason="no python3 on PATH")
async def test_bare_name_allowlisted_is_resolved_on_path() -> None:
    settings = ExecutorSettings(shell_enabled=True, shell_allowed_executables=("python3",),
                                shell_allowed_arguments=("python3=(?s).*",))
    outcome = await run(["python3", "-c", "import sys; print(sys.argv[0] == '-c')"],
                        settings=settings)
    assert outcome == Success(output="True\n")


async def test_bare_name_allowlisted_but_missing() -> None:
    settings = ExecutorSettings(shell_enabled=True,
                                shell_allowed_executables=("tickwork-no-such-tool",))
    outcome = await run(["tickwork-no-such-tool"], settings=settings)
    assert outcome == Fail(
        "payload.command: executable 'tickwork-no-such-tool' was not found on PATH; "
        "allowlist it in the config",
        retriable=False,
    )


async def test_missing_cwd_is_fatal(tmp_path: Path) -> None:
    outcome = await run(py("print(1)"), cwd=str(tmp_path / "absent"))
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert outcome.error.startswith(f"cannot start {PY}: ")


# --- running -----------------------------------------------------------------------------


async def test_success_records_stdout_and_stderr() -> None:
    outcome = await run(py("""
        import sys
        print("out line")
        print("err line", file=sys.stderr)
    """))
    assert outcome == Success(output="out line\n\n[stderr]\nerr line\n")


async def test_environment_is_minimal_plus_tickwork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWORK_TEST_SECRET", "do-not-leak")
    outcome = await run(
        py("import json, os; print(json.dumps(dict(os.environ)))"),
        env={"REGION": "eu", "APP_MODE": "x"},
    )
    assert isinstance(outcome, Success)
    assert outcome.output is not None
    env = json.loads(outcome.output)
    env.pop("LC_CTYPE", None)  # Python may set it for its own locale coercion
    expected = {
        "REGION": "eu",
        "APP_MODE": "x",
        "TICKWORK_IDEMPOTENCY_KEY": "job-1:2030-01-02T03:04:05Z",
        "TICKWORK_ATTEMPT": "1",
        "TICKWORK_SCHEDULED_AT": "2030-01-02T03:04:05Z",
        "TICKWORK_DEADLINE": "2030-01-02T03:04:35Z",
        "TICKWORK_JOB_ID": "job-1",
        "TICKWORK_JOB_NAME": "test-job",
    }
    for name in ("PATH", "HOME", "LANG"):
        if name in os.environ:
            expected[name] = os.environ[name]
    assert env == expected


async def test_cwd(tmp_path: Path) -> None:
    outcome = await run(py("import os; print(os.getcwd())"), cwd=str(tmp_path))
    assert outcome == Success(output=f"{os.path.realpath(tmp_path)}\n")


async def test_nonzero_exit_is_retriable_with_stderr_tail() -> None:
    outcome = await run(py("""
        import sys
        print("partial")
        sys.stderr.write("x" * 5000 + "\\ndisk full\\n")
        sys.exit(3)
    """))
    assert isinstance(outcome, Fail)
    assert outcome.retriable
    assert outcome.error.startswith("exit status 3: xxx")
    assert outcome.error.endswith("disk full")
    assert len(outcome.error) < 1100
    assert outcome.output is not None
    assert outcome.output.startswith("partial\n")


async def test_killed_by_signal_is_retriable() -> None:
    outcome = await run(py("import os, signal; os.kill(os.getpid(), signal.SIGTERM)"))
    assert outcome == Fail("killed by SIGTERM", retriable=True, output=None)


async def test_output_capped_and_pipes_drained() -> None:
    settings = dataclasses.replace(ENABLED, output_limit_bytes=1000)
    outcome = await run(py("""
        import sys
        for _ in range(64):
            sys.stdout.write("o" * 65536)
            sys.stderr.write("e" * 65536)
    """), settings=settings)
    assert isinstance(outcome, Success)
    assert outcome.output is not None
    stdout, _, stderr = outcome.output.partition("\n[stderr]\n")
    for text, char in ((stdout, "o"), (stderr, "e")):
        assert len(text.encode()) <= 1000
        assert text.startswith(char * 100)
        assert text.endswith("[truncated]")


# --- cancellation kills the whole process group ------------------------------------------


def _gone(pid: int) -> bool:
    """True once ``pid`` is dead: no such process, or a zombie nobody reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


GRANDCHILD = """
    import os, socket, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(1)"])
    with socket.create_connection(("127.0.0.1", {port})) as s:
        s.sendall(f"{{os.getpid()}} {{child.pid}}\\n".encode())
    {then}
"""


async def _pid_listener() -> tuple[asyncio.Server, int, asyncio.Future[list[int]]]:
    """A local server that resolves a future with the pids a job process sends it."""
    pids: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        if not pids.done():
            pids.set_result([int(p) for p in line.split()])
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], pids


async def _wait_gone(*pids: int) -> None:
    for _ in range(250):  # no event exists for a non-child's death: poll, bounded (5 s)
        if all(_gone(p) for p in pids):
            return
        await asyncio.sleep(0.02)


def _reap_leftovers(*pids: int) -> None:
    """Kill what a failed test left behind, so it cannot outlive the test run."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def test_timeout_kills_child_and_grandchild() -> None:
    server, port, pids = await _pid_listener()
    code = GRANDCHILD.format(port=port, then="while True: time.sleep(1)")
    ex = ShellExecutor(ENABLED)
    task = asyncio.create_task(ex.execute(make_context("shell", {"command": py(code)})))
    child = grandchild = 0
    try:
        child, grandchild = await asyncio.wait_for(pids, 30)
        assert not task.done()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(task, timeout=0.1)  # the worker's timeout, in miniature
        assert task.cancelled()
        await _wait_gone(child, grandchild)
        assert _gone(child)
        assert _gone(grandchild)
    finally:
        task.cancel()
        _reap_leftovers(*(p for p in (child, grandchild) if p))
        server.close()
        await server.wait_closed()
        await ex.close()


async def test_leftovers_are_killed_when_the_job_exits() -> None:
    # The grandchild inherits stdout; without the group kill the job would never see EOF.
    server, port, pids = await _pid_listener()
    code = GRANDCHILD.format(port=port, then="print('done')")
    grandchild = 0
    try:
        outcome = await run(py(code))
        assert outcome == Success(output="done\n")
        _, grandchild = await asyncio.wait_for(pids, 10)
        await _wait_gone(grandchild)
        assert _gone(grandchild)
    finally:
        if grandchild:
            _reap_leftovers(grandchild)
        server.close()
        await server.wait_closed()


# --- validate_payload --------------------------------------------------------------------


def test_validate_normalises() -> None:
    assert validate_payload("shell", {"command": ["backup", "--full"]}) == {
        "command": ["backup", "--full"], "env": {},
    }
    assert validate_payload("shell", {"command": ["/bin/x"], "env": {"A": "1"}, "cwd": "/srv"}) == {
        "command": ["/bin/x"], "env": {"A": "1"}, "cwd": "/srv",
    }


@pytest.mark.parametrize(
    ("payload", "field", "reason"),
    [
        (["x"], "payload", "must be a JSON object"),
        ({"command": ["x"], "shell": True}, "payload.shell",
         "unknown field; expected one of command, env, cwd"),
        ({"command": "backup --full"}, "payload.command",
         'must be a list of arguments, not a string: tickwork never runs a shell; write '
         '["/usr/bin/backup", "--full"] instead of "/usr/bin/backup --full"'),
        ({}, "payload.command", "is required: a non-empty list of strings"),
        ({"command": []}, "payload.command", "is required: a non-empty list of strings"),
        ({"command": ["x", 1]}, "payload.command", "must hold strings only, without NUL"),
        ({"command": ["x", "a\0b"]}, "payload.command", "must hold strings only, without NUL"),
        ({"command": ["./run.sh"]}, "payload.command",
         "the executable must be a bare name or an absolute path"),
        ({"command": [""]}, "payload.command",
         "the executable must be a bare name or an absolute path"),
        ({"command": ["x"], "env": []}, "payload.env", "must be a JSON object of strings"),
        ({"command": ["x"], "env": {"A=B": "1"}}, "payload.env", "'A=B' is not a variable name"),
        ({"command": ["x"], "env": {"": "1"}}, "payload.env", "'' is not a variable name"),
        ({"command": ["x"], "env": {"A": 1}}, "payload.env.A", "must be a string without NUL"),
        ({"command": ["x"], "env": {"TICKWORK_ATTEMPT": "9"}}, "payload.env.TICKWORK_ATTEMPT",
         "TICKWORK_* variables are set by tickwork"),
        ({"command": ["x"], "cwd": "relative/dir"}, "payload.cwd", "must be an absolute path"),
        ({"command": ["x"], "cwd": 3}, "payload.cwd", "must be an absolute path"),
    ],
)
def test_validate_rejects(payload: object, field: str, reason: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_payload("shell", payload)
    assert (info.value.field, info.value.reason) == (field, reason)


async def test_string_command_at_execution_is_fatal() -> None:
    outcome = await run("backup --full")
    assert isinstance(outcome, Fail)
    assert not outcome.retriable
    assert outcome.error.startswith("payload.command: must be a list of arguments, not a string")
