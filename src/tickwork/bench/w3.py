"""W3 recurring: cron (six fields, with seconds) and interval jobs, for a while.

The measured window starts a few seconds after creation and lasts ``duration`` seconds. The
ticks each job should fire in it are computed from its schedule with ``tickwork.schedules``;
a tick recorded once is delivered, never recorded is missed, recorded twice is duplicated.
Lateness is per tick: the start of each execution minus its scheduled instant.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tickwork.bench.record import Tally, lateness_summary, percentile
from tickwork.bench.report import svg_plot
from tickwork.bench.runner import Bench, memory_figures
from tickwork.bench.w1 import correctness, rounded
from tickwork.document import parse_job_document
from tickwork.models import idempotency_key
from tickwork.schedules import compile_schedule

START_AFTER_SECONDS = 5.0  # from creation to the window: the planner's horizon
DRAIN_SECONDS = 30.0  # after the window, how long the last ticks may take to show up

# The mix, by share of the jobs: cron with seconds (the hard case: all due at one instant)
# and intervals spread by an offset.
MIX: tuple[tuple[float, dict[str, Any]], ...] = (
    (0.30, {"cron": "*/5 * * * * *"}),
    (0.10, {"cron": "*/10 * * * * *"}),
    (0.10, {"cron": "0 * * * * *"}),
    (0.20, {"every": "10s"}),
    (0.20, {"every": "30s"}),
    (0.10, {"every": "60s"}),
)


def schedules(jobs: int, anchor: datetime) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for share, schedule in MIX:
        count = round(share * jobs)
        for i in range(count):
            if "every" in schedule:
                every = int(schedule["every"].removesuffix("s"))
                out.append({**schedule, "start_at": anchor.isoformat(), "offset": i % every})
            else:
                out.append(dict(schedule))
    while len(out) < jobs:
        out.append({"cron": "*/5 * * * * *"})
    return out[:jobs]


async def run_w3(bench: Bench, *, jobs: int, duration: int,
                 plot: str | None = None) -> dict[str, Any]:
    anchor = datetime.fromtimestamp(math.floor(time.time()), UTC)
    docs = [bench.recurring(f"w3-{i}", s) for i, s in enumerate(schedules(jobs, anchor))]
    bench.progress.say(f"W3: creating {jobs:,} recurring jobs")
    created, took = await bench.create(docs)
    start = datetime.fromtimestamp(math.ceil(time.time() + START_AFTER_SECONDS), UTC)
    end = datetime.fromtimestamp(start.timestamp() + duration, UTC)
    expected: dict[str, int] = {}
    for job, doc in zip(created, docs, strict=True):
        schedule = compile_schedule(parse_job_document(doc).spec.schedule)
        t = schedule.first_at_or_after(start)
        while t is not None and t < end:
            expected[idempotency_key(job.id, t)] = int(t.timestamp())
            t = schedule.next_after(t)
    del docs, created
    tally = Tally(expected=expected)
    bench.progress.total = len(expected)
    bench.progress.say(f"W3: created at {jobs / took:,.0f} jobs/s; measuring {len(expected):,} "
                       f"ticks from {start:%H:%M:%S} for {duration}s")
    t0, t1 = start.timestamp(), end.timestamp()

    def note() -> str:
        now = time.time()
        return f"window starts in {t0 - now:.0f}s" if now < t0 else f"pending {tally.lost:,}"

    deadline = time.monotonic() + (t1 - time.time()) + DRAIN_SECONDS
    await bench.follow(tally, until=lambda: tally.lost == 0 and time.time() >= t1,
                       deadline=deadline, note=note)
    bench.progress.finish(tally.done, note())
    memory = memory_figures(bench.deployment)
    ticks = tally.by_group()  # one group per scheduled second
    worst = sorted(((max(late) if late else math.inf, tick, n, got)
                    for tick, (n, got, late) in ticks.items()), reverse=True)[:5]
    per_second = [_row(tick - t0, late) for tick, (_, _, late) in ticks.items()]
    if plot:
        svg = svg_plot(per_second, title=f"W3: {jobs:,} recurring jobs, {bench.deployment.kind}")
        await asyncio.to_thread(Path(plot).write_text, svg, "utf-8")
    return {
        "workload": "w3",
        "parameters": {"jobs": jobs, "duration_seconds": duration,
                       "mix": [{"share": s, **m} for s, m in MIX]},
        "creation": {"jobs": jobs, "seconds": round(took, 3),
                     "jobs_per_second": round(jobs / took, 1) if took else None},
        "ticks_per_second": round(len(expected) / duration, 1),
        "lateness_seconds": rounded(lateness_summary(tally.lateness())),
        **correctness(tally),
        "missed": tally.lost,
        "worst_ticks": [{"at": f"+{tick - t0:.0f}s", "jobs": n, "ran": got,
                         "max_late_s": None if late == math.inf else round(late, 3)}
                        for late, tick, n, got in worst],
        "peak_memory": memory,
    }


def _row(t: float, late: list[float]) -> dict[str, Any]:
    ordered = sorted(late)
    return {"t": t, "p50": percentile(ordered, 50), "p99": percentile(ordered, 99),
            "max": ordered[-1] if ordered else None}
