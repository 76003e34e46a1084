"""W4 sustained: N interval jobs every minute, offsets spread evenly over the minute.

288,000 jobs every 60 s is 4,800 executions a second, every second, for ``duration`` seconds.
The jobs are created first through the bulk path, a batch at a time, with progress; the
measured window starts after creation. The ticks each job should fire in the window follow
from its schedule (``anchor + offset + k * every``, exact microseconds as the planner reads
them); a tick recorded once is delivered, never recorded is missed, recorded twice is
duplicated. Two counts, apart:

- the record the executed jobs write themselves (``tickwork.bench.jobs``), the independent one;
- the store's attempts (PostgreSQL): the window's occurrences with an attempt, with more than
  one, and the attempts in all.

Figures: sustained executions/s (first executions that started inside the window, over its
length), p50/p99/max start lateness, missed and duplicated ticks by both counts, the RSS of
each process kind every ``RSS_EVERY_SECONDS`` (and whether it stayed flat), CPU milliseconds
per execution of each process kind and of each process.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tickwork.bench import cpu
from tickwork.bench.deploy import Deployment, is_postgres
from tickwork.bench.record import Tally, lateness_series, lateness_summary
from tickwork.bench.report import svg_plot
from tickwork.bench.runner import CREATE_BATCH, Bench, memory_figures, rss_figures
from tickwork.bench.w1 import correctness, rounded
from tickwork.models import idempotency_key
from tickwork.schedules import EverySchedule

START_AFTER_SECONDS = 5.0  # from creation to the window: the planner's horizon
DRAIN_SECONDS = 30.0  # after the window, how long its last ticks may take to show up
RSS_EVERY_SECONDS = 10.0
FLAT_GROWTH = 0.10  # RSS is flat when the window's last fifth is within 10 % of its second


def offset_of(i: int, jobs: int, every: float) -> float:
    """Job ``i``'s offset: spread evenly over the interval, to the microsecond (the
    schedule's own precision)."""
    return round(every * i / jobs, 6)


def schedule_of(i: int, jobs: int, every: float, anchor: datetime,
                end_at: datetime | None = None) -> dict[str, Any]:
    return {"every": f"{every:g}s", "start_at": anchor.isoformat(),
            "offset": offset_of(i, jobs, every),
            **({"end_at": end_at.isoformat()} if end_at is not None else {})}


def ticks(schedule: EverySchedule, start: datetime, end: datetime) -> list[datetime]:
    """The schedule's ticks in [start, end)."""
    s = schedule
    out = []
    t = s.first_at_or_after(start)
    while t is not None and t < end:
        out.append(t)
        t = s.next_after(t)
    return out


async def create(bench: Bench, jobs: int, every: float, anchor: datetime,
                 end_at: datetime | None = None) -> tuple[list[str], float]:
    """The jobs, a batch of documents at a time through the bulk path; their ids in order."""
    ids: list[str] = []
    took = 0.0
    bench.progress.total = jobs
    for first in range(0, jobs, CREATE_BATCH):
        docs = [bench.recurring(f"w4-{i}", schedule_of(i, jobs, every, anchor, end_at))
                for i in range(first, min(jobs, first + CREATE_BATCH))]
        created, seconds = await bench.create(docs)
        took += seconds
        ids += [j.id for j in created]
        bench.progress.update(len(ids), f"creating, {len(ids) / took:,.0f} jobs/s")
    bench.progress.finish(len(ids), f"created, {len(ids) / took if took else 0:,.0f} jobs/s")
    return ids, took


async def run_w4(bench: Bench, *, jobs: int, duration: int,
                 every: float = 60.0, plot: str | None = None) -> dict[str, Any]:
    anchor = datetime.fromtimestamp(math.floor(time.time()), UTC)
    bench.progress.say(f"W4: creating {jobs:,} jobs every {every:g}s, offsets spread over "
                       "the interval")
    ids, took = await create(bench, jobs, every, anchor)
    start = datetime.fromtimestamp(math.ceil(time.time() + START_AFTER_SECONDS), UTC)
    end = datetime.fromtimestamp(start.timestamp() + duration, UTC)
    tally = Tally()
    bench.progress.total = jobs * max(1, round(duration / every))
    bench.progress.say(f"W4: measuring the ticks from {start:%H:%M:%S} for {duration}s "
                       f"(about {jobs / every:,.0f}/s)")
    t0, t1 = start.timestamp(), end.timestamp()
    # Millions of ticks take longer to list than the lead to the window: they are added to
    # the tally while it runs (an execution seen before its tick is listed waits as a stray).
    expecting = asyncio.create_task(expect_ticks(tally, ids, every=every, anchor=anchor,
                                                 start=start, end=end))

    def note() -> str:
        now = time.time()
        return f"window starts in {t0 - now:.0f}s" if now < t0 else f"pending {tally.lost:,}"

    rss = RssSeries(bench.deployment, t0)
    sampler = asyncio.create_task(rss.run())
    meter = CpuPerProcess(bench.deployment)
    at_t0 = asyncio.create_task(meter.mark_at(t0))
    try:
        deadline = time.monotonic() + (t1 - time.time()) + DRAIN_SECONDS
        await bench.follow(tally, until=lambda: (expecting.done() and tally.lost == 0
                                                 and time.time() >= t1),
                           deadline=deadline, note=note)
        await expecting
        bench.progress.total = len(tally.expected)
        await at_t0
    finally:
        for task in (sampler, at_t0, expecting):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    bench.progress.finish(tally.done, note())
    rss.sample()
    cpu_figures = meter.figures(tally.done)
    memory = memory_figures(bench.deployment)
    in_window = sum(1 for e in tally.first.values() if t0 <= e.started < t1)
    if plot:
        title = (f"W4: {jobs:,} jobs every {every:g}s ({jobs / every:,.0f} ticks/s), "
                 f"{bench.deployment.kind}")
        svg = svg_plot(lateness_series(tally, t0), title=title)
        await asyncio.to_thread(Path(plot).write_text, svg, "utf-8")
    expected = tally.expected
    return {
        "workload": "w4",
        "parameters": {"jobs": jobs, "every_seconds": every, "duration_seconds": duration},
        "creation": {"jobs": jobs, "seconds": round(took, 3),
                     "jobs_per_second": round(jobs / took, 1) if took else None},
        "ticks_per_second": round(len(expected) / duration, 1),
        "executions_per_second": round(in_window / duration, 1),
        "lateness_seconds": rounded(lateness_summary(tally.lateness())),
        **correctness(tally),
        "missed": tally.lost,
        "store": await store_counts(bench.deployment, bench.tag, start, end, len(expected)),
        "peak_memory": memory,
        "rss_mib": rss.figures(),
        "cpu": cpu_figures,
    }


EXPECT_CHUNK = 20_000  # jobs whose ticks are listed at a time, in a thread


async def expect_ticks(tally: Tally, ids: list[str], *, every: float, anchor: datetime,
                       start: datetime, end: datetime) -> None:
    """Add every job's ticks in [start, end) to the tally, a chunk of jobs at a time."""
    jobs = len(ids)

    def chunk(first: int) -> dict[str, int]:
        return {idempotency_key(job_id, t): int(t.timestamp())
                for i, job_id in enumerate(ids[first:first + EXPECT_CHUNK], first)
                for t in ticks(EverySchedule(every, offset_of(i, jobs, every), anchor),
                               start, end)}

    for first in range(0, jobs, EXPECT_CHUNK):
        tally.expect(await asyncio.to_thread(chunk, first))


async def store_counts(d: Deployment, tag: str, start: datetime, end: datetime,
                       expected: int) -> dict[str, Any]:
    """The window's occurrences by the store's attempts (PostgreSQL only)."""
    if not is_postgres(d.url):
        return {"checked": False, "why": "the store's count is read on PostgreSQL only"}
    return await asyncio.to_thread(_store_counts, d.url, tag, start, end, expected)


STORE_COUNTS = """
SELECT count(*) AS attempts,
       count(DISTINCT (a.job_id, a.scheduled_at)) AS occurrences,
       count(*) FILTER (WHERE a.number > 1) AS retried
  FROM attempts a JOIN jobs j ON j.id = a.job_id
 WHERE j.name LIKE %(names)s AND a.scheduled_at >= %(start)s AND a.scheduled_at < %(end)s
"""


def _store_counts(url: str, tag: str, start: datetime, end: datetime,
                  expected: int) -> dict[str, Any]:
    import psycopg  # noqa: PLC0415  (the postgres extra, only for PostgreSQL runs)

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute(STORE_COUNTS, {"names": f"{tag}-w4-%", "start": start,
                                          "end": end}).fetchone()
    attempts, occurrences, retried = row if row is not None else (0, 0, 0)
    return {"checked": True, "attempts": attempts, "executed": occurrences,
            "missed": expected - occurrences, "duplicated": attempts - occurrences,
            "retried": retried}


class RssSeries:
    """Each process kind's RSS (MiB, its largest process) from the window's start, every
    ``RSS_EVERY_SECONDS``, and whether it stayed flat."""

    def __init__(self, deployment: Deployment, window_start: float) -> None:
        self.deployment = deployment
        self.window_start = window_start
        self.series: list[dict[str, Any]] = []

    def sample(self) -> None:
        self.series.append({"t": round(time.time() - self.window_start, 1),
                            **rss_figures(self.deployment)})

    async def run(self) -> None:
        await asyncio.sleep(max(0.0, self.window_start - time.time()))  # a fixed instant
        while True:
            self.sample()
            await asyncio.sleep(RSS_EVERY_SECONDS)

    def figures(self) -> dict[str, Any]:
        kinds = sorted({k for row in self.series for k in row if k != "t"})
        return {"every_seconds": RSS_EVERY_SECONDS, "series": self.series,
                **{kind: flatness([row[kind] for row in self.series if kind in row])
                   for kind in kinds}}


def flatness(values: list[int]) -> dict[str, Any]:
    """First, most and last RSS, and ``flat``: the mean of the last fifth within
    ``FLAT_GROWTH`` of the second fifth's (the first fifth is warm-up)."""
    if not values:
        return {"flat": None}
    fifth = max(1, len(values) // 5)
    early = values[fifth:2 * fifth] or values[:fifth]
    late = values[-fifth:]
    growth = (sum(late) / len(late)) / max(sum(early) / len(early), 1) - 1
    return {"start": values[0], "max": max(values), "end": values[-1],
            "growth": round(growth, 3), "flat": growth <= FLAT_GROWTH}


class CpuPerProcess:
    """CPU milliseconds per execution from the window's start to the end, by process kind and
    by process."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.start = cpu.snapshot(deployment.process_ids())

    async def mark_at(self, t: float) -> None:
        await asyncio.sleep(max(0.0, t - time.time()))  # a fixed instant, not a condition
        self.start = cpu.snapshot(self.deployment.process_ids())

    def figures(self, executions: int) -> dict[str, Any]:
        end = cpu.snapshot(self.deployment.process_ids())
        n = max(executions, 1)
        per_kind = cpu.spent(self.start, end)
        per_process = {f"{kind}-{pid}": round(1000 * (s - self.start.get(kind, {}).get(pid, 0.0))
                                              / n, 3)
                       for kind, pids in end.items() if kind != "postgres"
                       for pid, s in pids.items()}
        return {"seconds": per_kind,
                "ms_per_execution": {k: round(1000 * v / n, 3) for k, v in per_kind.items()},
                "ms_per_execution_by_process": per_process}
