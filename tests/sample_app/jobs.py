"""Jobs declared in code, for the registry tests."""

from __future__ import annotations

import tickwork
from tickwork.executors.base import ExecutionContext


@tickwork.job(cron="*/5 * * * *", timezone="Europe/Berlin", retry={"max_attempts": 5})
def refresh_cache(ctx: ExecutionContext) -> str:
    return f"refreshed for {ctx.scheduled_at:%H:%M}"


@tickwork.job(every="1h", name="hourly-sum", args=[1, 2])
def add(a: int, b: int) -> int:
    return a + b
