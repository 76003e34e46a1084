"""What every executor receives and returns.

An executor turns one attempt into one outcome value (Success, Fail or Cancel). The worker owns
the timeout: it cancels the executor's coroutine when the deadline passes, and an executor that
holds outside resources (a child process) must release them on cancellation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from tickwork.errors import Outcome


@dataclass(frozen=True, slots=True)
class ExecutorSettings:
    python_allowed_modules: tuple[str, ...] = ()  # import-path prefixes a python job may use
    shell_enabled: bool = False
    shell_allowed_executables: tuple[str, ...] = ()  # names or absolute paths
    output_limit_bytes: int = 64 * 1024  # captured output and bodies are cut here
    http_user_agent: str = "tickwork"


@dataclass(frozen=True, slots=True)
class ExecutionContext:
    """Everything one attempt knows (G6)."""

    job_id: str
    job_name: str
    kind: str
    payload: dict[str, Any]
    scheduled_at: datetime
    attempt: int
    max_attempts: int
    idempotency_key: str
    deadline: datetime
    timeout_seconds: float


class Executor(Protocol):
    kind: str

    async def execute(self, ctx: ExecutionContext) -> Outcome: ...
