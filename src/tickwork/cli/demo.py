"""Demo jobs for ``tickwork run --demo``: a few small Python jobs to watch run."""

from __future__ import annotations

import platform
from typing import Any

from tickwork.executors.base import ExecutionContext
from tickwork.outcomes import Fail

DEMO_JOBS: list[dict[str, Any]] = [
    {"name": "demo-heartbeat", "schedule": {"every": "10s"}, "kind": "python",
     "payload": {"callable": "tickwork.cli.demo:heartbeat"}, "tags": ["demo"]},
    {"name": "demo-every-5-seconds", "schedule": {"cron": "*/5 * * * * *"}, "kind": "python",
     "payload": {"callable": "tickwork.cli.demo:tick", "args": ["five"]}, "tags": ["demo"]},
    {"name": "demo-minutely-report", "schedule": {"cron": "* * * * *"}, "kind": "python",
     "payload": {"callable": "tickwork.cli.demo:report"}, "tags": ["demo"]},
    {"name": "demo-flaky", "schedule": {"every": "30s"}, "kind": "python",
     "payload": {"callable": "tickwork.cli.demo:flaky"}, "tags": ["demo"],
     "retry": {"max_attempts": 3, "backoff_base_seconds": 1, "backoff_max_seconds": 10}},
]


def heartbeat(ctx: ExecutionContext) -> str:
    return f"alive on {platform.node()} (scheduled {ctx.scheduled_at:%H:%M:%S})"


def tick(label: str) -> str:
    return f"tick {label}"


async def report(ctx: ExecutionContext) -> dict[str, Any]:
    return {"report": "minutely", "key": ctx.idempotency_key}


def flaky(ctx: ExecutionContext) -> str:
    """Fails its first attempt, to show a retry with backoff."""
    if ctx.attempt == 1:
        raise Fail("first attempts of demo-flaky always fail; the retry will succeed")
    return f"succeeded on attempt {ctx.attempt}"
