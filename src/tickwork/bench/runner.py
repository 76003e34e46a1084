"""What every workload shares: set up the deployment, warm it up, create jobs through the bulk
path, follow the record until the expected executions are in, and tear everything down."""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tickwork.bench import cpu
from tickwork.bench.calibrate import calibration_ms
from tickwork.bench.deploy import Deployment
from tickwork.bench.jobs import payload
from tickwork.bench.progress import Progress
from tickwork.bench.record import Execution, RecordReader, Tally
from tickwork.client import AsyncClient
from tickwork.errors import StoreUnavailable
from tickwork.models import Job, idempotency_key, rfc3339

POLL_SECONDS = 0.1  # how often the bench reads the record: measurement, not a test wait
WARMUP_JOBS_PER_WORKER = 200
WARMUP_SECONDS = 90.0
CREATE_BATCH = 5000


@dataclass
class Bench:
    """One run: the deployment, a client on its database, the record and the progress line."""

    deployment: Deployment
    client: AsyncClient
    reader: RecordReader
    progress: Progress
    tag: str
    warmup_rate: float = 0.0  # jobs/s the warm-up batch was created at
    notes: list[str] = field(default_factory=list)

    @property
    def record(self) -> str:
        return str(self.deployment.record_dir)

    def one_off(self, name: str, at: datetime) -> dict[str, Any]:
        return {"name": f"{self.tag}-{name}", "schedule": {"at": rfc3339(at)},
                "kind": "python", "payload": payload(self.record)}

    def recurring(self, name: str, schedule: dict[str, Any]) -> dict[str, Any]:
        return {"name": f"{self.tag}-{name}", "schedule": schedule, "kind": "python",
                "payload": payload(self.record)}

    async def create(self, docs: Sequence[dict[str, Any]],
                     batch: int = CREATE_BATCH) -> tuple[list[Job], float]:
        """Create through the bulk path (``AsyncClient.create_jobs``); returns the jobs and
        the seconds it took."""
        jobs: list[Job] = []
        started = time.perf_counter()
        for i in range(0, len(docs), batch):
            jobs += await self.client.create_jobs(docs[i:i + batch])
        return jobs, time.perf_counter() - started

    def poll(self, tally: Tally) -> list[Execution]:
        executions = self.reader.poll()
        tally.add(executions)
        return executions

    async def follow(self, tally: Tally, *, until: Callable[[], bool], deadline: float,
                     note: Callable[[], str] = lambda: "", show: bool = True,
                     read: Callable[[], list[Execution]] | None = None) -> bool:
        """Read the record (or ``read()``: a consumer's) until ``until()`` holds or the
        monotonic ``deadline`` passes."""
        while True:
            if read is None:
                self.poll(tally)
            else:
                tally.add(read())
            if show:
                self.progress.update(tally.done, note())
            if until():
                return True
            if time.monotonic() >= deadline:
                return False
            self.deployment.check_alive()
            await asyncio.sleep(POLL_SECONDS)

    async def warm_up(self) -> None:
        """Run jobs until every worker process has executed one: each has started, imported
        the job module and reached the store, so the measured phase starts warm."""
        d = self.deployment
        want = d.workers if d.kind.startswith("postgres") else 1
        n = WARMUP_JOBS_PER_WORKER * want
        deadline = time.monotonic() + WARMUP_SECONDS
        round_ = 0
        while len(self.reader.pids) < want:
            now = datetime.now(UTC)
            docs = [self.one_off(f"warmup-{round_}-{i}", now) for i in range(n)]
            jobs, took = await self.create(docs)
            self.warmup_rate = max(self.warmup_rate, n / took if took else 0.0)
            tally = Tally(expected={idempotency_key(j.id, now): 0 for j in jobs})
            self.progress.say(f"warm-up: {n} jobs until all {want} worker process(es) ran one")
            # Until this round ran, or every worker ran one: a worker still starting when the
            # round came may find it all taken by another, so another round follows.
            ok = await self.follow(tally, until=_round_done(tally, self.reader, want),
                                   deadline=deadline, show=False)
            if not ok:
                d.keep_workdir = True
                tail = "\n".join(f"{c.kind} {c.pid}: {c.log_tail(5)}" for c in d.children)
                raise StoreUnavailable(
                    f"warm-up: {tally.done} of {n} jobs ran and {len(self.reader.pids)} of "
                    f"{want} worker process(es) ran one within {WARMUP_SECONDS:.0f}s; logs "
                    f"and record kept in {d.workdir}:\n{tail}")
            round_ += 1


def _round_done(tally: Tally, reader: RecordReader, processes: int) -> Callable[[], bool]:
    return lambda: tally.lost == 0 or len(reader.pids) >= processes


@asynccontextmanager
async def bench_run(deployment: Deployment, *, progress: Progress,
                    tag: str) -> AsyncIterator[Bench]:
    """The deployment up and warm for the body; everything stopped and dropped after."""
    d = deployment
    d.check()
    client: AsyncClient | None = None
    try:
        await d.create_database()
        progress.say(f"database {d.url.rsplit('@', 1)[-1]}; starting {d.kind} processes")
        client = await AsyncClient.open(d.url)  # migrates before the processes start
        await d.start()
        bench = Bench(d, client, RecordReader(d.record_dir), progress, tag)
        await bench.warm_up()
        yield bench
    finally:
        await d.stop()
        if client is not None:
            await client.close()
        await d.drop_database()
        if not (d.keep or d.keep_workdir) and d.profile_dir is None:
            shutil.rmtree(d.workdir, ignore_errors=True)


class CpuMeter:
    """CPU seconds per process kind before the workload's instant T (creation and planning) and
    from T to the end (the drain), with the drain's CPU milliseconds per execution."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.start = cpu.snapshot(deployment.process_ids())
        self.at_t: dict[str, dict[int, float]] | None = None

    async def mark_at(self, t: float) -> None:
        await asyncio.sleep(max(0.0, t - time.time()))  # a fixed instant, not a condition
        self.at_t = cpu.snapshot(self.deployment.process_ids())

    def figures(self, executions: int) -> dict[str, Any]:
        end = cpu.snapshot(self.deployment.process_ids())
        mid = self.at_t if self.at_t is not None else self.start
        drain = cpu.spent(mid, end)
        return {"before_t": cpu.spent(self.start, mid), "from_t": drain,
                "from_t_ms_per_execution": {
                    k: round(1000 * v / executions, 3) for k, v in drain.items()}
                if executions else {}}


def memory_figures(d: Deployment) -> dict[str, dict[str, int]]:
    """Peak RSS in MiB per process kind: the largest process of the kind, and all of them."""
    out: dict[str, dict[str, int]] = {}
    for kind, values in d.peak_memory().items():
        out[kind] = {"max_mib": max(values) // 1024, "total_mib": sum(values) // 1024,
                     "processes": len(values)}
    return out


def rss_figures(d: Deployment) -> dict[str, int]:
    """RSS now (``VmRSS``) in MiB per process kind: the largest process of the kind."""
    out: dict[str, int] = {}
    for child in d.children:
        rss = child.status("VmRSS")
        if rss is not None:
            out[child.kind] = max(out.get(child.kind, 0), rss // 1024)
    return out


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) // 1024
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "memory_mib": mem,
            "python": platform.python_version(), "platform": platform.platform(),
            "calibration_ms": calibration_ms()}
