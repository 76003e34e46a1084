"""W1 burst: N one-off no-op jobs, all due at one instant T.

T is set far enough ahead that creation (through the bulk path) finishes first: the warm-up
measured a creation rate, and T leaves twice the time that rate needs, plus a margin. The
figures: creation rate, drain time from T to the last execution's start, throughput,
start lateness, lost, duplicated and early executions, peak memory per process kind.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime
from typing import Any

from tickwork.bench.record import Tally, lateness_summary
from tickwork.bench.runner import Bench, CpuMeter, memory_figures
from tickwork.models import idempotency_key

MARGIN_SECONDS = 3.0


def lead_seconds(jobs: int, rate: float) -> float:
    """How far ahead T goes: twice the creation time at ``rate``, plus a margin."""
    return MARGIN_SECONDS + 2 * jobs / max(rate, 500.0)


async def run_w1(bench: Bench, *, jobs: int, drain_timeout: float) -> dict[str, Any]:
    lead = lead_seconds(jobs, bench.warmup_rate)
    at = datetime.fromtimestamp(math.ceil(time.time() + lead), UTC)
    docs = [bench.one_off(f"w1-{i}", at) for i in range(jobs)]
    bench.progress.say(f"W1: creating {jobs:,} jobs due at {at:%H:%M:%S} (in {lead:.0f}s)")
    created, took = await bench.create(docs)
    del docs
    creation_rate = jobs / took if took else 0.0
    late_created = time.time() > at.timestamp()
    if late_created:
        bench.notes.append("creation finished after T: lateness includes creation time")
    tally = Tally(expected={idempotency_key(j.id, at): 0 for j in created})
    del created
    bench.progress.say(f"W1: created at {creation_rate:,.0f} jobs/s; waiting for T and the drain")
    t = at.timestamp()
    meter = CpuMeter(bench.deployment)

    def note() -> str:
        if not tally.done:
            return f"T in {t - time.time():.1f}s" if time.time() < t else ""
        span = max(tally.last_started - t, 1e-3)
        return f"{tally.done / span:,.0f}/s"

    deadline = time.monotonic() + max(0.0, t - time.time()) + drain_timeout
    at_t = asyncio.create_task(meter.mark_at(t))
    drained = await bench.follow(tally, until=lambda: tally.lost == 0, deadline=deadline,
                                 note=note)
    await at_t
    cpu = meter.figures(tally.done)
    bench.progress.finish(tally.done, note())
    memory = memory_figures(bench.deployment)
    if not drained:
        bench.notes.append(f"timed out {drain_timeout:.0f}s after T with {tally.lost:,} not run")
    drain = max(tally.last_started - t, 0.0) if tally.done else None
    return {
        "workload": "w1",
        "parameters": {"jobs": jobs, "lead_seconds": round(lead, 1)},
        "creation": {"jobs": jobs, "seconds": round(took, 3),
                     "jobs_per_second": round(creation_rate, 1), "finished_before_t":
                     not late_created},
        "drain_seconds": None if drain is None else round(drain, 3),
        "throughput_per_second": round(tally.done / drain, 1) if drain else None,
        "lateness_seconds": rounded(lateness_summary(tally.lateness())),
        **correctness(tally),
        "peak_memory": memory,
        "cpu_seconds": cpu,
    }


def correctness(tally: Tally) -> dict[str, int]:
    return {"expected": len(tally.expected), "executed": tally.done, "lost": tally.lost,
            "duplicated": tally.duplicated, "retried": tally.retried, "early": tally.early}


def rounded(values: dict[str, float | None]) -> dict[str, float | None]:
    return {k: None if v is None else round(v, 4) for k, v in values.items()}
