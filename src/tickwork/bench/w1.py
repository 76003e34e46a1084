"""W1 burst: N one-off no-op jobs, all due at one instant T.

T is set far enough ahead that creation (through the bulk path) finishes first: the warm-up
measured a creation rate, and T leaves twice the time that rate needs, plus a margin. The
figures: creation rate, drain time from T to the last execution's start, throughput,
start lateness, lost, duplicated and early executions, peak memory per process kind.

With ``steady_rate``, a second set of one-off jobs is due at that rate, evenly, from a second
before T for ``steady_seconds``: the work a deployment has to keep on time while a burst
drains. Their start lateness is reported apart, overall and for those due during the drain.

With ``global_limit``, the jobs' queue gets that ``max_running`` across every worker before
they are created (docs/limits.md): the cost of a limit on the claim path, next to a run without.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from tickwork.bench.record import Tally, lateness_summary
from tickwork.bench.runner import Bench, CpuMeter, memory_figures
from tickwork.document.limits import Limits
from tickwork.models import idempotency_key

MARGIN_SECONDS = 3.0
STEADY_LEAD_SECONDS = 1.0  # the steady stream is already flowing when the burst is due
BURST, STEADY = 0, 1  # the tally's groups
QUEUE = "default"  # the queue the jobs run in (Bench.one_off names none)


def lead_seconds(jobs: int, rate: float) -> float:
    """How far ahead T goes: twice the creation time at ``rate``, plus a margin."""
    return MARGIN_SECONDS + 2 * jobs / max(rate, 500.0)


async def run_w1(bench: Bench, *, jobs: int, drain_timeout: float, steady_rate: float = 0.0,
                 steady_seconds: float = 10.0, global_limit: int | None = None
                 ) -> dict[str, Any]:
    if global_limit is not None:
        await bench.client.set_queue_limits(QUEUE, Limits(max_running=global_limit))
        bench.progress.say(f"W1: queue {QUEUE} limited to {global_limit:,} running at once")
    steady = int(steady_rate * steady_seconds)
    lead = lead_seconds(jobs + steady, bench.warmup_rate)
    at = datetime.fromtimestamp(math.ceil(time.time() + lead), UTC)
    docs = [bench.one_off(f"w1-{i}", at) for i in range(jobs)]
    first_steady = at - timedelta(seconds=STEADY_LEAD_SECONDS)
    docs += [bench.one_off(f"w1s-{i}", first_steady + timedelta(seconds=i / steady_rate))
             for i in range(steady)]
    also = f" and {steady:,} due at {steady_rate:,.0f}/s from T-1s" if steady else ""
    bench.progress.say(f"W1: creating {jobs:,} jobs due at {at:%H:%M:%S} (in {lead:.0f}s){also}")
    created, took = await bench.create(docs)
    del docs
    creation_rate = len(created) / took if took else 0.0
    late_created = time.time() > at.timestamp()
    if late_created:
        bench.notes.append("creation finished after T: lateness includes creation time")
    tally = Tally(expected={
        idempotency_key(j.id, at if n < jobs else _steady_at(first_steady, n - jobs,
                                                             steady_rate)):
        BURST if n < jobs else STEADY for n, j in enumerate(created)})
    del created
    bench.progress.say(f"W1: created at {creation_rate:,.0f} jobs/s; waiting for T and the drain")
    t = at.timestamp()
    meter = CpuMeter(bench.deployment)

    def note() -> str:
        if not tally.done:
            return f"T in {t - time.time():.1f}s" if time.time() < t else ""
        span = max(tally.last_started - t, 1e-3)
        return f"{tally.done / span:,.0f}/s"

    deadline = (time.monotonic() + max(0.0, t - time.time()) + drain_timeout
                + (steady_seconds if steady else 0.0))
    at_t = asyncio.create_task(meter.mark_at(t))
    drained = await bench.follow(tally, until=lambda: tally.lost == 0, deadline=deadline,
                                 note=note)
    await at_t
    cpu = meter.figures(tally.done)
    bench.progress.finish(tally.done, note())
    memory = memory_figures(bench.deployment)
    if not drained:
        bench.notes.append(f"timed out {drain_timeout:.0f}s after T with {tally.lost:,} not run")
    burst = [e for k, e in tally.first.items() if tally.expected[k] == BURST]
    drain = max(max(e.started for e in burst) - t, 0.0) if burst else None
    figures: dict[str, Any] = {
        "workload": "w1",
        "parameters": {"jobs": jobs, "lead_seconds": round(lead, 1),
                       "global_limit": global_limit},
        "creation": {"jobs": jobs + steady, "seconds": round(took, 3),
                     "jobs_per_second": round(creation_rate, 1), "finished_before_t":
                     not late_created},
        "drain_seconds": None if drain is None else round(drain, 3),
        "throughput_per_second": round(len(burst) / drain, 1) if drain else None,
        "lateness_seconds": rounded(lateness_summary(tally.lateness(BURST))),
        **correctness(tally),
        "peak_memory": memory,
        "cpu_seconds": cpu,
    }
    if steady:
        figures["parameters"].update(steady_rate=steady_rate, steady_seconds=steady_seconds)
        figures["steady"] = steady_figures(tally, t, drain)
    return figures


def _steady_at(first: datetime, i: int, rate: float) -> datetime:
    return first + timedelta(seconds=i / rate)


def steady_figures(tally: Tally, t: float, drain: float | None) -> dict[str, Any]:
    """Lateness of the steady stream: all of it, and the jobs due while the burst drained."""
    firsts = [e for k, e in tally.first.items() if tally.expected[k] == STEADY]
    end = t + (drain or 0.0)
    during = [e.started - e.scheduled for e in firsts if t <= e.scheduled <= end]
    return {"jobs": sum(1 for g in tally.expected.values() if g == STEADY),
            "executed": len(firsts),
            "lateness_seconds": rounded(lateness_summary(e.started - e.scheduled
                                                         for e in firsts)),
            "during_drain": {"jobs": len(during),
                             "lateness_seconds": rounded(lateness_summary(during))}}


def correctness(tally: Tally) -> dict[str, int]:
    return {"expected": len(tally.expected), "executed": tally.done, "lost": tally.lost,
            "duplicated": tally.duplicated, "retried": tally.retried, "early": tally.early}


def rounded(values: dict[str, float | None]) -> dict[str, float | None]:
    return {k: None if v is None else round(v, 4) for k, v in values.items()}
