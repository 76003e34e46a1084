"""The ``shell`` kind: run an allowlisted executable with an argv list, never through a shell.

Payload: ``{"command": ["/usr/local/bin/backup", "--full"], "env": {...}, "cwd": "/srv"}``. Off
unless ``ExecutorSettings.shell_enabled``. The child gets its own process group, a minimal
environment plus the TICKWORK_* variables (G6), and is killed with its whole group when the
attempt is cancelled (the worker's timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
from typing import Any

from tickwork.errors import ValidationError
from tickwork.executors.base import (
    ExecutionContext,
    ExecutorSettings,
    cap_text,
    checked_payload,
    is_secret_reference,
    payload_object,
)
from tickwork.executors.shell_policy import (
    argument_problem,
    env_name_problem,
    options_problem,
    parse_argument_patterns,
)
from tickwork.models import rfc3339
from tickwork.outcomes import Fail, Outcome, Success

KIND = "shell"
FIELDS = ("command", "env", "cwd")
INHERITED_ENV = ("PATH", "HOME", "LANG")  # the only variables taken from the worker
DISABLED = (
    "shell jobs are disabled; enable them in the config (shell_enabled) "
    "and allowlist the executable"
)
STDERR_TAIL_BYTES = 1024  # how much of the end of stderr a failure's error keeps
_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 bytes that cannot start a character


def validate_payload(payload: object) -> dict[str, Any]:
    """The normalised payload, or ValidationError naming the field."""
    payload = payload_object(payload, FIELDS)
    command = _validate_command(payload.get("command"))
    env = _validate_env(payload.get("env", {}))
    out: dict[str, Any] = {"command": command, "env": env}
    cwd = payload.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str) or not os.path.isabs(cwd) or "\0" in cwd:
            raise ValidationError("payload.cwd", "must be an absolute path")
        out["cwd"] = cwd
    return out


def _validate_command(command: object) -> list[str]:
    if isinstance(command, str):
        raise ValidationError(
            "payload.command",
            'must be a list of arguments, not a string: tickwork never runs a shell; write '
            '["/usr/bin/backup", "--full"] instead of "/usr/bin/backup --full"',
        )
    if not isinstance(command, list) or not command:
        raise ValidationError("payload.command", "is required: a non-empty list of strings")
    if any(is_secret_reference(a) for a in command):
        raise ValidationError("payload.command", "must not hold secrets: arguments show up in "
                              "process listings; pass a secret in env instead")
    if not all(isinstance(a, str) and "\0" not in a for a in command):
        raise ValidationError("payload.command", "must hold strings only, without NUL")
    exe = command[0]
    if not exe or ("/" in exe and not os.path.isabs(exe)):
        raise ValidationError(
            "payload.command", "the executable must be a bare name or an absolute path"
        )
    return list(command)


def _validate_env(env: object) -> dict[str, Any]:
    if not isinstance(env, dict):
        raise ValidationError("payload.env", "must be a JSON object of strings")
    for name, value in env.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise ValidationError("payload.env", f"{str(name)[:100]!r} is not a variable name")
        if is_secret_reference(value):
            continue
        if not isinstance(value, str) or "\0" in value:
            raise ValidationError(f"payload.env.{name}", "must be a string without NUL")
        problem = env_name_problem(name)
        if problem is not None:
            raise ValidationError(f"payload.env.{name}", problem)
    return dict(env)


def resolve_executable(
    name: str, allowed: tuple[str, ...], path: str | None
) -> tuple[str | None, str | None]:
    """``(absolute path, None)`` for an allowlisted executable, else ``(None, reason)``.

    A bare name is allowed when it is in ``allowed`` or resolves (on the worker's PATH, never
    the payload's) to an absolute path in it; an absolute path only when it is in ``allowed``.
    """
    if os.path.isabs(name):
        if os.path.normpath(name) in {os.path.normpath(a) for a in allowed if os.path.isabs(a)}:
            return name, None
        return None, f"executable {name!r} is not in shell_allowed_executables"
    found = shutil.which(name, path=path)
    if name in allowed or (found is not None and found in allowed):
        if found is None:
            return None, f"executable {name!r} was not found on PATH"
        return found, None
    return None, f"executable {name!r} is not in shell_allowed_executables"


def resolve_command(payload: dict[str, Any], settings: ExecutorSettings,
                    path: str | None, *, look_up: bool = True) -> str:
    """The absolute path of the executable a validated payload may run, or ValidationError
    naming the executable, argument, variable or directory the settings do not allow.
    ``look_up=False``: an allowlisted bare name is taken as it is (a process that is not the
    worker cannot know the worker's PATH)."""
    if not settings.shell_enabled:
        raise ValidationError("kind", DISABLED)
    argv: list[str] = payload["command"]
    allowed = settings.shell_allowed_executables
    exe: str | None = argv[0]
    refusal = None
    if look_up or argv[0] not in allowed:
        exe, refusal = resolve_executable(argv[0], allowed, path)
    if exe is None:
        raise ValidationError("payload.command", f"{refusal}; allowlist it in the config")
    patterns = parse_argument_patterns(settings.shell_allowed_arguments)
    problem = argument_problem(argv[0], exe, argv[1:], patterns)
    if problem is not None:
        raise ValidationError("payload.command", problem)
    refused = options_problem(payload, settings.shell_allowed_env, settings.shell_allowed_cwd)
    if refused is not None:
        raise ValidationError(*refused)
    return exe


class _Capture:
    """One output stream: its first ``limit`` + 1 bytes and its last few; the rest is dropped."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()

    def feed(self, chunk: bytes) -> None:
        room = self.limit + 1 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
        self.tail += chunk
        del self.tail[:-STDERR_TAIL_BYTES]

    def text(self) -> str:
        return cap_text(bytes(self.head), self.limit)

    def tail_text(self) -> str:
        """The end of the stream, starting at a whole character."""
        return bytes(self.tail).lstrip(_CONTINUATION).decode("utf-8", "replace").strip()


class _Child(asyncio.SubprocessProtocol):
    """Collects a child's output as it arrives (so its pipes never fill) and notes its exit.

    ``exited`` resolves when the process exits, ``closed`` once it has exited and every pipe
    is at EOF (a grandchild may hold a pipe open after the child is gone).
    """

    def __init__(self, limit: int) -> None:
        loop = asyncio.get_running_loop()
        self.out = _Capture(limit)
        self.err = _Capture(limit)
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        chunk = data.encode() if isinstance(data, str) else data
        (self.out if fd == 1 else self.err).feed(chunk)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class ShellExecutor:
    """Runs ``shell`` jobs as child processes, each in its own process group."""

    kind = KIND

    def __init__(self, settings: ExecutorSettings) -> None:
        self._settings = settings

    async def close(self) -> None:
        """Nothing to release: every child is reaped by the execute() that started it."""

    def _env(self, payload: dict[str, Any], ctx: ExecutionContext) -> dict[str, str]:
        env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
        env.setdefault("PATH", os.defpath)
        env.update(payload["env"])
        env.update({
            "TICKWORK_IDEMPOTENCY_KEY": ctx.idempotency_key,
            "TICKWORK_ATTEMPT": str(ctx.attempt),
            "TICKWORK_SCHEDULED_AT": rfc3339(ctx.scheduled_at),
            "TICKWORK_DEADLINE": rfc3339(ctx.deadline),
            "TICKWORK_JOB_ID": ctx.job_id,
            "TICKWORK_JOB_NAME": ctx.job_name,
        })
        if ctx.upstream is not None:  # a run a chain triggered: the run that triggered it
            up = ctx.upstream
            env.update({
                "TICKWORK_UPSTREAM_KEY": up.idempotency_key,
                "TICKWORK_UPSTREAM_JOB_ID": up.job_id,
                "TICKWORK_UPSTREAM_JOB_NAME": up.job_name,
                "TICKWORK_UPSTREAM_SCHEDULED_AT": rfc3339(up.scheduled_at),
                "TICKWORK_UPSTREAM_EVENT": up.event.value,
            })
            if up.output is not None:
                env["TICKWORK_UPSTREAM_OUTPUT"] = up.output.replace("\0", "")
        return env

    async def execute(self, ctx: ExecutionContext) -> Outcome:
        if not self._settings.shell_enabled:
            return Fail(DISABLED, retriable=False)
        payload = checked_payload(validate_payload, ctx.payload)
        if isinstance(payload, Fail):
            return payload
        try:
            exe = resolve_command(payload, self._settings, os.environ.get("PATH", os.defpath))
        except ValidationError as exc:
            return Fail(str(exc), retriable=False)
        argv: list[str] = payload["command"]
        limit = self._settings.output_limit_bytes
        try:
            transport, child = await asyncio.get_running_loop().subprocess_exec(
                lambda: _Child(limit),
                exe,
                *argv[1:],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._env(payload, ctx),
                cwd=payload.get("cwd"),
                start_new_session=True,  # its own process group, so a kill reaches grandchildren
            )
        except OSError as exc:
            return Fail(f"cannot start {exe}: {exc}", retriable=False)
        pgid = transport.get_pid()
        try:
            # shield: a cancelled wait must not cancel the futures the cleanup still needs
            await asyncio.shield(child.exited)
            _kill_group(pgid)  # leftovers in its group would hold the pipes open
            await asyncio.shield(child.closed)
        except BaseException:  # cancelled (the timeout) or anything else: nothing outlives us
            _kill_group(pgid)
            await child.exited  # SIGKILL cannot be ignored: this is prompt
            raise
        finally:
            transport.close()
        code = transport.get_returncode()
        assert code is not None  # closed implies exited
        return self._outcome(code, child.out, child.err)

    def _outcome(self, code: int, out: _Capture, err: _Capture) -> Outcome:
        stdout, stderr = out.text(), err.text()
        output = (stdout if not stderr else f"{stdout}\n[stderr]\n{stderr}") or None
        if code == 0:
            return Success(output=output)
        tail = err.tail_text()
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            error = f"killed by {name}"
        else:
            error = f"exit status {code}"
        return Fail(f"{error}: {tail}" if tail else error, retriable=True, output=output)


def _kill_group(pgid: int) -> None:
    """SIGKILL every process in the group; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
