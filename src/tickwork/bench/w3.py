"""W3 recurring: cron (six fields, with seconds) and interval jobs, for a while.

The measured window starts a few seconds after creation and lasts ``duration`` seconds. The
ticks each job should fire in it are computed from its schedule with ``tickwork.schedules``;
a tick recorded once is delivered, never recorded is missed, recorded twice is duplicated.
Lateness is per tick: the start of each execution minus its scheduled instant.

With ``idle_jobs``, that many one-off jobs are defined alongside the recurring load, created
first through the bulk path in batches. ``idle_due="later"``: they are due a day after the run,
so the planner never loads them; the processes' memory must not grow with their number.
``idle_due="window"``: they are due spread evenly over the measured window instead, so the
planner plans every one of them; their executions are checked like the ticks. The processes'
RSS is read at the window's start, every second during it, and at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tickwork.bench.record import Tally, lateness_summary, percentile
from tickwork.bench.report import svg_plot
from tickwork.bench.runner import CREATE_BATCH, Bench, memory_figures, rss_figures
from tickwork.bench.w1 import correctness, rounded
from tickwork.document import parse_job_document
from tickwork.models import Job, idempotency_key
from tickwork.schedules import compile_schedule

START_AFTER_SECONDS = 5.0  # from creation to the window: the planner's horizon
DRAIN_SECONDS = 30.0  # after the window, how long the last ticks may take to show up
IDLE_DUE = ("later", "window")
IDLE_LATER = timedelta(days=1)  # "later": due from a day after the run, spread over a day
RSS_EVERY_SECONDS = 1.0  # how often the processes' RSS is read during the window

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


def idle_due_at(i: int, n: int, start: float, seconds: float) -> datetime:
    """The due instant of idle job ``i`` of ``n``, spread evenly over ``seconds`` from the unix
    instant ``start``."""
    return datetime.fromtimestamp(start + seconds * i / max(n, 1), UTC)


async def create_idle(bench: Bench, n: int, due: Callable[[int], datetime], *,
                      keep_keys: bool) -> tuple[dict[str, int], float]:
    """``n`` one-off jobs, job ``i`` due at ``due(i)``, created through the bulk path a batch
    at a time (never all the documents at once), with progress. Returns the idempotency key of
    each one's run (by its scheduled second) if ``keep_keys``, and the seconds creation took."""
    keys: dict[str, int] = {}
    took = 0.0
    bench.progress.total = n
    done = 0
    for first in range(0, n, CREATE_BATCH):
        dues = [due(i) for i in range(first, min(n, first + CREATE_BATCH))]
        docs = [bench.one_off(f"idle-{first + k}", at) for k, at in enumerate(dues)]
        jobs, seconds = await bench.create(docs)
        took += seconds
        done += len(jobs)
        if keep_keys:
            keys.update((idempotency_key(j.id, at), int(at.timestamp()))
                        for j, at in zip(jobs, dues, strict=True))
        bench.progress.update(done, f"creating idle jobs, {done / took:,.0f} jobs/s")
    bench.progress.finish(done, f"idle jobs created, {done / took if took else 0:,.0f} jobs/s")
    return keys, took


async def idle_phase(bench: Bench, *, idle_jobs: int, idle_due: str, jobs: int,
                     duration: int, anchor: datetime) -> tuple[dict[str, int], float, float]:
    """Create the idle jobs. Returns their keys (``window`` only), the seconds creation took,
    and the unix instant the window was planned to start at (``window``; else 0)."""
    if idle_due == "later":
        day = IDLE_LATER.total_seconds()
        first = anchor.timestamp() + day + duration
        bench.progress.say(f"W3: creating {idle_jobs:,} idle one-off jobs, due from "
                           f"{IDLE_LATER.days} day after the run")
        keys, took = await create_idle(
            bench, idle_jobs, lambda i: idle_due_at(i, idle_jobs, first, day), keep_keys=False)
        return keys, took, 0.0
    # The window starts after all creation: estimated from the warm-up's rate, twice over (as
    # W1 sets T), so that the idle jobs' due times are fixed before they are created.
    rate = max(bench.warmup_rate, 500.0)
    start = math.ceil(time.time() + START_AFTER_SECONDS + 2 * (idle_jobs + jobs) / rate)
    bench.progress.say(f"W3: creating {idle_jobs:,} one-off jobs due over the window from "
                       f"{datetime.fromtimestamp(start, UTC):%H:%M:%S}")
    keys, took = await create_idle(
        bench, idle_jobs, lambda i: idle_due_at(i, idle_jobs, start, duration), keep_keys=True)
    return keys, took, float(start)


async def run_w3(bench: Bench, *, jobs: int, duration: int, plot: str | None = None,
                 idle_jobs: int = 0, idle_due: str = "later") -> dict[str, Any]:
    if idle_due not in IDLE_DUE:
        raise ValueError(f"idle_due must be one of {IDLE_DUE}, got {idle_due!r}")
    anchor = datetime.fromtimestamp(math.floor(time.time()), UTC)
    idle_keys: dict[str, int] = {}
    idle_took = planned_start = 0.0
    if idle_jobs:
        idle_keys, idle_took, planned_start = await idle_phase(
            bench, idle_jobs=idle_jobs, idle_due=idle_due, jobs=jobs, duration=duration,
            anchor=anchor)
    docs = [bench.recurring(f"w3-{i}", s) for i, s in enumerate(schedules(jobs, anchor))]
    bench.progress.say(f"W3: creating {jobs:,} recurring jobs")
    created, took = await bench.create(docs)
    start = datetime.fromtimestamp(max(planned_start,
                                       math.ceil(time.time() + START_AFTER_SECONDS)), UTC)
    if planned_start and start.timestamp() > planned_start:
        bench.notes.append(f"creation took longer than estimated: the idle jobs' window began "
                           f"{start.timestamp() - planned_start:.0f}s before the measured one")
    end = datetime.fromtimestamp(start.timestamp() + duration, UTC)
    expected = expected_ticks(created, docs, start, end)
    ticks = len(expected)
    expected.update(idle_keys)
    del docs, created
    tally = Tally(expected=expected)
    bench.progress.total = len(expected)
    idle_note = f" and {len(idle_keys):,} idle one-offs" if idle_keys else ""
    bench.progress.say(f"W3: created at {jobs / took:,.0f} jobs/s; measuring {ticks:,} "
                       f"ticks{idle_note} from {start:%H:%M:%S} for {duration}s")
    t0, t1 = start.timestamp(), end.timestamp()

    def note() -> str:
        now = time.time()
        return f"window starts in {t0 - now:.0f}s" if now < t0 else f"pending {tally.lost:,}"

    rss = RssSampler(bench, t0)
    sampler = asyncio.create_task(rss.run())
    try:
        deadline = time.monotonic() + (t1 - time.time()) + DRAIN_SECONDS
        await bench.follow(tally, until=lambda: tally.lost == 0 and time.time() >= t1,
                           deadline=deadline, note=note)
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
    bench.progress.finish(tally.done, note())
    rss.sample(end=True)
    memory = memory_figures(bench.deployment)  # after: a peak is never below an RSS read
    by_tick = tally.by_group()  # one group per scheduled second
    worst = sorted(((max(late) if late else math.inf, tick, n, got)
                    for tick, (n, got, late) in by_tick.items()), reverse=True)[:5]
    per_second = [_row(tick - t0, late) for tick, (_, _, late) in by_tick.items()]
    if plot:
        svg = svg_plot(per_second, title=f"W3: {jobs:,} recurring jobs, {bench.deployment.kind}")
        await asyncio.to_thread(Path(plot).write_text, svg, "utf-8")
    return {
        "workload": "w3",
        "parameters": {"jobs": jobs, "duration_seconds": duration,
                       "idle_jobs": idle_jobs, "idle_due": idle_due,
                       "mix": [{"share": s, **m} for s, m in MIX]},
        "creation": {"jobs": jobs, "seconds": round(took, 3),
                     "jobs_per_second": round(jobs / took, 1) if took else None},
        **({"idle": _idle_figures(tally, idle_keys, idle_jobs, idle_due, idle_took)}
           if idle_jobs else {}),
        "ticks_per_second": round(ticks / duration, 1),
        "lateness_seconds": rounded(lateness_summary(tally.lateness())),
        **correctness(tally),
        "missed": tally.lost,
        "worst_ticks": [{"at": f"+{tick - t0:.0f}s", "jobs": n, "ran": got,
                         "max_late_s": None if late == math.inf else round(late, 3)}
                        for late, tick, n, got in worst],
        "peak_memory": memory,
        "rss_mib": rss.figures(),
    }


def expected_ticks(created: Sequence[Job], docs: Sequence[dict[str, Any]], start: datetime,
                   end: datetime) -> dict[str, int]:
    """The idempotency key of every tick of the jobs in [start, end), by its second."""
    expected: dict[str, int] = {}
    for job, doc in zip(created, docs, strict=True):
        schedule = compile_schedule(parse_job_document(doc).spec.schedule)
        t = schedule.first_at_or_after(start)
        while t is not None and t < end:
            expected[idempotency_key(job.id, t)] = int(t.timestamp())
            t = schedule.next_after(t)
    return expected


def _idle_figures(tally: Tally, keys: dict[str, int], jobs: int, due: str,
                  took: float) -> dict[str, Any]:
    out: dict[str, Any] = {"jobs": jobs, "due": due, "seconds": round(took, 3),
                           "jobs_per_second": round(jobs / took, 1) if took else None}
    if keys:
        ran = [tally.first[k] for k in keys if k in tally.first]
        out["executed"] = len(ran)
        out["lateness_seconds"] = rounded(lateness_summary(e.started - e.scheduled
                                                           for e in ran))
    return out


class RssSampler:
    """The processes' RSS (MiB, the largest process of each kind): at the window's start,
    the most seen while it runs (read every ``RSS_EVERY_SECONDS``), and at the end."""

    def __init__(self, bench: Bench, window_start: float) -> None:
        self.bench = bench
        self.window_start = window_start
        self.at_start: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.at_end: dict[str, int] = {}

    def sample(self, *, end: bool = False) -> None:
        now = rss_figures(self.bench.deployment)
        for kind, mib in now.items():
            self.most[kind] = max(self.most.get(kind, 0), mib)
        if end:
            self.at_end = now

    async def run(self) -> None:
        await asyncio.sleep(max(0.0, self.window_start - time.time()))  # a fixed instant
        self.at_start = rss_figures(self.bench.deployment)
        while True:
            self.sample()
            await asyncio.sleep(RSS_EVERY_SECONDS)

    def figures(self) -> dict[str, dict[str, int]]:
        return {kind: {"window_start": self.at_start.get(kind, 0), "window_max": most,
                       "end": self.at_end.get(kind, 0)} for kind, most in self.most.items()}


def _row(t: float, late: list[float]) -> dict[str, Any]:
    ordered = sorted(late)
    return {"t": t, "p50": percentile(ordered, 50), "p99": percentile(ordered, 99),
            "max": ordered[-1] if ordered else None}
