"""W2 a day in ten minutes: the load profile of a 1M-jobs-a-day system, compressed in time.

The generator takes what the original load script took: the hour of the day (its share of
the day's base load), a start and an end minute, the heavy minutes, and the spike count of
each heavy minute (15,000-20,000 jobs, all due at the minute's first instant, on top of the
base load, which is spread evenly over each minute). Time is compressed by ``compression``:
a simulated minute lasts 60/compression real seconds.

One-off jobs are created minute by minute, ``LEAD_SECONDS`` (or one compressed minute) ahead
of their due time, in batches through the bulk path, so memory stays bounded. The figures are
per simulated minute, plus a lateness series per real second for the plot.

With a retention (``--retention 3m``: the processes purge finished one-off jobs and prune their
history that long after they finished), the tables' rows and bytes are sampled while the run
lasts (tickwork.bench.tables), judged flat or not, and plotted with ``--size-plot``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tickwork.bench.record import Tally, lateness_series, lateness_summary, percentile
from tickwork.bench.report import svg_plot
from tickwork.bench.runner import Bench, memory_figures
from tickwork.bench.tables import TableSampler, sampler_for
from tickwork.bench.w1 import correctness, rounded
from tickwork.errors import ValidationError
from tickwork.models import idempotency_key

# Share of a day's jobs in each hour (UTC): quiet nights, a busy working day. Sums to 1.
_WEIGHTS = (1, 1, 1, 1, 1, 2, 3, 5, 7, 8, 8, 7, 6, 7, 8, 8, 7, 6, 4, 3, 2, 2, 1, 1)
HOUR_SHARE = tuple(w / sum(_WEIGHTS) for w in _WEIGHTS)
LEAD_SECONDS = 5.0
START_AFTER_SECONDS = 2.0
DRAIN_SECONDS = 60.0
PRESETS: dict[str, dict[str, Any]] = {
    "ci": {"start_minute": 0, "end_minute": 15, "heavy_minutes": (5,)},
    "full": {"start_minute": 0, "end_minute": 60, "heavy_minutes": (5, 30)},
}


@dataclass(frozen=True, slots=True)
class LoadProfile:
    hour: int = 9
    start_minute: int = 0
    end_minute: int = 15
    heavy_minutes: tuple[int, ...] = (5,)
    spike: tuple[int, int] = (15_000, 20_000)
    per_day: int = 1_000_000
    compression: float = 6.0
    seed: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.start_minute < self.end_minute <= 60:
            raise ValidationError("--start-minute", "need 0 <= start minute < end minute <= 60")
        if not 0 < self.compression <= 3600:
            raise ValidationError("--compression", "must be greater than 0 (at most 3600)")
        if not 0 <= self.spike[0] <= self.spike[1]:
            raise ValidationError("--spike", "must be N or LO-HI with 0 <= LO <= HI")

    @property
    def minute_seconds(self) -> float:
        return 60.0 / self.compression

    @property
    def base_per_minute(self) -> int:
        return round(self.per_day * HOUR_SHARE[self.hour] / 60)

    def offsets(self, minute: int, rng: random.Random) -> list[float]:
        """Due offsets within the minute, in simulated seconds: spike jobs at 0, base evenly."""
        n = self.base_per_minute
        base = [60.0 * (i + rng.random()) / n for i in range(n)] if n else []
        spike = rng.randint(*self.spike) if minute in self.heavy_minutes else 0
        return [0.0] * spike + base


def profile_from_args(args: argparse.Namespace) -> LoadProfile:
    preset = PRESETS[args.preset]
    heavy = preset["heavy_minutes"]
    if args.heavy_minutes is not None:
        try:
            heavy = tuple(int(m) for m in args.heavy_minutes.split(",") if m.strip())
        except ValueError:
            raise ValidationError("--heavy-minutes", "expected minutes like 5,30") from None
    spike = (15_000, 20_000)
    if args.spike is not None:
        try:
            lo, _, hi = args.spike.partition("-")
            spike = (int(lo), int(hi or lo))
        except ValueError:
            raise ValidationError("--spike", "expected N or LO-HI, e.g. 15000-20000") from None
    pick = {k: v for k, v in (("hour", args.hour), ("start_minute", args.start_minute),
                              ("end_minute", args.end_minute), ("per_day", args.per_day),
                              ("compression", args.compression)) if v is not None}
    start_end = {k: preset[k] for k in ("start_minute", "end_minute")}
    return LoadProfile(**{**start_end, **pick}, heavy_minutes=heavy, spike=spike,
                       seed=args.seed)


def retention_env(seconds: float) -> dict[str, str]:
    """What the processes are started with for ``--retention``: finished one-off jobs purged
    and their history pruned that long after they finished, by a pruner looking four times
    per retention."""
    return {"TICKWORK_FINISHED_JOB_RETENTION_SECONDS": repr(seconds),
            "TICKWORK_RETENTION_DAYS": repr(seconds / 86400),
            "TICKWORK_PRUNE_INTERVAL_SECONDS": repr(seconds / 4)}


async def run_w2(bench: Bench, p: LoadProfile, *, plot: str | None = None,
                 retention: float | None = None, size_plot: str | None = None,
                 ) -> dict[str, Any]:
    rng = random.Random(p.seed)  # noqa: S311  (a reproducible load, not cryptography)
    lead = max(LEAD_SECONDS, p.minute_seconds)
    t0 = float(int(time.time() + START_AFTER_SECONDS + lead))
    minutes = list(range(p.start_minute, p.end_minute))
    tally = Tally()
    created = {"jobs": 0, "seconds": 0.0}

    def minute_start(m: int) -> float:
        return t0 + (m - p.start_minute) * p.minute_seconds

    async def creator() -> None:
        for m in minutes:
            wait = minute_start(m) - lead - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            docs, dues = [], []
            for i, offset in enumerate(p.offsets(m, rng)):
                due = datetime.fromtimestamp(minute_start(m) + offset / p.compression, UTC)
                docs.append(bench.one_off(f"w2-{m}-{i}", due))
                dues.append(due)
            jobs, took = await bench.create(docs)
            created["jobs"] += len(jobs)
            created["seconds"] += took
            tally.expect({idempotency_key(j.id, d): m for j, d in zip(jobs, dues, strict=True)})

    total = sum(p.base_per_minute for _ in minutes) + sum(
        (p.spike[0] + p.spike[1]) // 2 for m in minutes if m in p.heavy_minutes)
    bench.progress.total = total
    end = minute_start(p.end_minute)
    bench.progress.say(f"W2: hour {p.hour:02d} minutes {p.start_minute}-{p.end_minute} at "
                       f"{p.compression:g}x ({end - t0:.0f}s); spikes at {p.heavy_minutes}; "
                       f"~{total:,} jobs")
    sampler = await _sampler(bench, retention, size_plot)
    task = asyncio.create_task(creator())

    def note() -> str:
        now = time.time()
        minute = p.start_minute + int((now - t0) // p.minute_seconds)
        where = "starts in %.0fs" % (t0 - now) if now < t0 else f"minute {minute}"
        return f"{where}, pending {tally.lost:,}"

    try:
        deadline = time.monotonic() + (end - time.time()) + DRAIN_SECONDS
        await bench.follow(tally, until=lambda: task.done() and tally.lost == 0
                           and time.time() >= end, deadline=deadline, note=note)
    finally:
        if not task.done():
            task.cancel()
            bench.notes.append("creation had not finished when the run ended")
        await asyncio.gather(task, return_exceptions=True)
        tables = None if sampler is None else await sampler.stop()
    bench.progress.finish(tally.done, note())
    memory = memory_figures(bench.deployment)
    if not task.cancelled() and (error := task.exception()) is not None:
        raise error
    series = lateness_series(tally, t0)
    if plot:
        spans = [(minute_start(m) - t0, minute_start(m) - t0 + p.minute_seconds)
                 for m in p.heavy_minutes if m in minutes]
        await _lateness_plot(bench, p, series, spans, plot)
    if tables is not None:
        await _tables_done(bench, tables, size_plot, p)
    jobs, took = created["jobs"], created["seconds"]
    return {
        "workload": "w2",
        "parameters": {"hour": p.hour, "start_minute": p.start_minute,
                       "end_minute": p.end_minute, "heavy_minutes": list(p.heavy_minutes),
                       "spike": list(p.spike), "per_day": p.per_day,
                       "compression": p.compression, "base_per_minute": p.base_per_minute},
        "creation": {"jobs": jobs, "seconds": round(took, 3),
                     "jobs_per_second": round(jobs / took, 1) if took else None},
        **_lateness(tally, p),
        **correctness(tally),
        "peak_memory": memory,
        "series": series,
        **({} if tables is None else {"tables": tables}),
    }


async def _lateness_plot(bench: Bench, p: LoadProfile, series: list[dict[str, Any]],
                         spans: list[tuple[float, float]], plot: str) -> None:
    title = (f"W2: hour {p.hour:02d}, minutes {p.start_minute}-{p.end_minute} at "
             f"{p.compression:g}x, {bench.deployment.kind}")
    svg = svg_plot(series, title=title, spikes=spans)
    await asyncio.to_thread(Path(plot).write_text, svg, "utf-8")


async def _sampler(bench: Bench, retention: float | None,
                   size_plot: str | None) -> TableSampler | None:
    """With a retention or a size plot: the tables sampled from now on."""
    if retention is None and not size_plot:
        return None
    sampler = await sampler_for(bench.deployment.url, retention=retention,
                                say=bench.progress.say)
    await sampler.start()
    return sampler


async def _tables_done(bench: Bench, tables: dict[str, Any], size_plot: str | None,
                       p: LoadProfile) -> None:
    """Note a run too short to judge, and write the size plot."""
    retention = tables["retention_seconds"]
    if retention is not None and tables["retentions_passed"] < 2:
        bench.notes.append(f"the run passed the retention ({retention:g}s) "
                           f"{tables['retentions_passed']} time(s): the flatness verdict "
                           "needs at least two; a shorter --retention or a longer run")
    if size_plot:
        from tickwork.bench.sizeplot import size_plot as plot_of  # noqa: PLC0415

        title = (f"W2 tables: hour {p.hour:02d}, minutes {p.start_minute}-{p.end_minute} at "
                 f"{p.compression:g}x, {bench.deployment.kind}, "
                 + (f"retention {retention:g}s" if retention else "no retention given")
                 + f" ({tables['method']})")
        svg = plot_of(tables["series"], title=title, retention=retention)
        await asyncio.to_thread(Path(size_plot).write_text, svg, "utf-8")


def _lateness(tally: Tally, p: LoadProfile) -> dict[str, Any]:
    """Overall, outside the spike minutes, in them, and per minute."""
    per_minute = []
    outside: list[float] = []
    inside: list[float] = []
    for m, (n, ran, late) in tally.by_group().items():
        (inside if m in p.heavy_minutes else outside).extend(late)
        ordered = sorted(late)
        per_minute.append({"minute": m, "spike": m in p.heavy_minutes, "jobs": n, "ran": ran,
                           "lost": n - ran, "p50_s": percentile(ordered, 50),
                           "p99_s": percentile(ordered, 99),
                           "max_s": ordered[-1] if ordered else None})
    return {
        "lateness_seconds": rounded(lateness_summary(tally.lateness())),
        "lateness_outside_spikes_seconds": rounded(lateness_summary(outside)),
        "lateness_spike_minutes_seconds": rounded(lateness_summary(inside)),
        "per_minute": per_minute,
    }

