"""An independent record of what ran: jobs that append a line per execution to a file.

Tests judge delivery from this ledger, written by the executed jobs themselves, not from the
store's tables. Each line is JSON: idempotency key, attempt, scheduled time, process id and the
wall-clock instants the execution started and ended.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tickwork.executors.base import ExecutionContext
from tickwork.models import rfc3339

HANG_SECONDS = 3600.0


def record(ctx: ExecutionContext, path: str, sleep: float = 0.0, fail_attempts: int = 0,
           hang_attempts: int = 0) -> str:
    """Append this execution to the ledger at ``path``; optionally take ``sleep`` seconds, fail
    the first ``fail_attempts`` attempts, and hang in the first ``hang_attempts`` (an hour: a
    test kills the process running them)."""
    started = time.time()
    if ctx.attempt <= hang_attempts:
        time.sleep(HANG_SECONDS)
    if sleep:
        time.sleep(sleep)
    line = {
        "key": ctx.idempotency_key, "job": ctx.job_name, "attempt": ctx.attempt,
        "scheduled_at": rfc3339(ctx.scheduled_at), "pid": os.getpid(),
        "started": started, "ended": time.time(),
    }
    if ctx.upstream is not None:  # a run a chain triggered
        line["upstream"] = ctx.upstream.idempotency_key
        line["upstream_event"] = ctx.upstream.event.value
        line["upstream_output"] = ctx.upstream.output
    with Path(path).open("a", encoding="utf-8") as ledger:
        ledger.write(json.dumps(line) + "\n")
        ledger.flush()
        os.fsync(ledger.fileno())
    if ctx.attempt <= fail_attempts:
        raise RuntimeError(f"failing attempt {ctx.attempt} on purpose")
    return f"recorded {ctx.idempotency_key}"


def read(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line]
