"""A fault run: real processes, jobs, faults at seeded moments, and the verdict.

    async with FaultRun(tmp_path, postgres_url, name="kill-worker", seed=seed) as run:
        s, w = run.scheduler("s1"), run.worker("w1", queues="default:8")
        await run.start(s, w)
        jobs = await run.create([run.doc("tick", {"cron": "* * * * * *", ...})])
        run.expect(jobs, until=t1)
        await run.pause(run.rng.uniform(1, 3))      # the seeded moment
        run.kill9(w)
        await run.settle(run.all_done, within=30)
    report = run.verdict()                          # printed; run.check() asserts it passed

Faults are recorded as they are injected (``kill9``, ``sigterm``, ``freeze``) or noticed (a
process that dies on its own: a failpoint, a poison job), so the classifier can tell an explained
duplicate from an unexplained one and measure recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tickwork.client import AsyncClient
from tickwork.drivers.base import OccurrenceListParams
from tickwork.models import Job, rfc3339
from tickwork.schedules import compile_schedule, for_job
from tickwork.testing.faults import ledger
from tickwork.testing.faults.classify import Execution, Fault, Report, classify
from tickwork.testing.faults.procs import Proc, base_env, faketime_env

SEED_ENV = "TICKWORK_FAULTS_SEED"
FINAL_STATES = frozenset({"succeeded", "missed", "skipped_overlap", "dead", "crashed",
                          "cancelled"})
FULL_ENV = "TICKWORK_FAULTS_FULL"
FAILPOINT_LINE = re.compile(r"failpoint (\w+) hit \d+: killing process (\d+) at ([\d.]+)")
# Short run leases and intervals, so a dead worker's runs are taken over within seconds, not
# half a minute. (Shard leases are short by default: a dead scheduler's shards move within
# seconds anyway.) ``FaultRun(defaults=True)`` leaves them out.
FAST = {"TICKWORK_LEASE_SECONDS": "2", "TICKWORK_HEARTBEAT_SECONDS": "0.5",
        "TICKWORK_RESCUE_INTERVAL_SECONDS": "0.5", "TICKWORK_POLL_INTERVAL_SECONDS": "0.5"}


def seed_from_env() -> int:
    raw = os.environ.get(SEED_ENV)
    return int(raw) if raw else random.SystemRandom().randrange(1, 2**31)


def full() -> bool:
    return os.environ.get(FULL_ENV, "") in ("1", "true", "yes")


def now() -> datetime:
    return datetime.now(UTC)


def until_then(t: datetime) -> float:
    """Seconds from now until ``t`` (0 if past)."""
    return max(0.0, (t - now()).total_seconds())


def next_second(after: float) -> datetime:
    t = datetime.now(UTC) + timedelta(seconds=after)
    return t.replace(microsecond=0) + timedelta(seconds=1)


def occurrence_id(job: str, scheduled_at: datetime | float) -> str:
    # Milliseconds: the ledger stores epoch floats, whose microseconds may not round-trip.
    ts = scheduled_at.timestamp() if isinstance(scheduled_at, datetime) else scheduled_at
    when = datetime.fromtimestamp(round(ts, 3), UTC)
    return f"{job}@{rfc3339(when)}"


def expected_of(jobs: Iterable[Job], since: datetime, until: datetime) -> dict[str, float]:
    """Every occurrence the definitions produce in [since, until], from tickwork.schedules."""
    out: dict[str, float] = {}
    for job in jobs:
        schedule = for_job(compile_schedule(job.spec.schedule), job.id)
        t = schedule.first_at_or_after(since)
        while t is not None and t <= until:
            out[occurrence_id(job.spec.name, t)] = t.timestamp()
            t = schedule.next_after(t)
    return out


class FaultRun:
    def __init__(self, tmp: Path, database: str, *, name: str, seed: int | None = None,
                 settings: Mapping[str, str] | None = None, redis: str | None = None,
                 defaults: bool = False) -> None:
        """``redis``: the URL schedulers and workers get (the postgres + redis deployment);
        one process may be given another (a proxy's) with its own ``redis=``. ``defaults``:
        the processes run with tickwork's default settings (only ``settings`` on top), not
        with FAST's short run leases."""
        self.tmp = tmp
        self.redis = redis
        self.database = database
        self.name = name
        self.seed = seed_from_env() if seed is None else seed
        self.rng = random.Random(self.seed)  # noqa: S311  (fault timing, not cryptography)
        self.settings = {**({} if defaults else FAST), **(settings or {})}
        self.ledger = tmp / "ledger.sqlite3"
        ledger.create(self.ledger)
        self.procs: list[Proc] = []
        self.faults: list[Fault] = []
        self.expected: dict[str, float] = {}
        self.names: dict[str, str] = {}  # job id -> name
        self.lines = asyncio.Event()  # set by every log line of every process
        # Monotonic readings (the ledger's) to real epoch seconds: one clock for all processes.
        self.mono_offset = time.time() - time.monotonic()
        self._client: AsyncClient | None = None
        print(f"\nfault run {name!r}: seed {self.seed} ({SEED_ENV}={self.seed} to repeat)")

    async def __aenter__(self) -> FaultRun:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for p in self.procs:
            await p.close()
        if self._client is not None:
            await self._client.close()
        if exc[0] is not None:
            print(f"fault run {self.name!r} failed with seed {self.seed}; last log lines:")
            for p in self.procs:
                print(p.tail(15))

    # -- processes ---------------------------------------------------------------------------

    def env(self, worker: str, **extra: str) -> dict[str, str]:
        return base_env(self.database, **self.settings, TICKWORK_TEST_WORKER_ID=worker,
                        **extra)

    def _add(self, name: str, env: dict[str, str], *args: str) -> Proc:
        proc = Proc(name, env, *args, lines_event=self.lines)
        self.procs.append(proc)
        return proc

    def _with_redis(self, env: Mapping[str, str], redis: str | None) -> dict[str, str]:
        url = redis or self.redis
        return {**env, "TICKWORK_REDIS_URL": url} if url else dict(env)

    def scheduler(self, name: str, *, redis: str | None = None, **env: str) -> Proc:
        return self._add(name, self.env(name, **self._with_redis(env, redis)), "scheduler",
                         "--scheduler-id", name)

    def worker(self, name: str, queues: str = "default:8", *, failpoints: str = "",
               faketime: str = "", redis: str | None = None, **env: str) -> Proc:
        extra = self._with_redis(env, redis)
        if failpoints:
            extra["TICKWORK_FAILPOINTS"] = failpoints
            extra["TICKWORK_TEST_FAILPOINT_SEED"] = str(self.seed)
        if faketime:
            extra.update(faketime_env(faketime))
        return self._add(name, self.env(name, **extra), "worker", "--queues", queues,
                         "--worker-id", name)

    def service(self, name: str, queues: str = "default:8", **env: str) -> Proc:
        """``tickwork run`` (the embedded deployment) without its API."""
        return self._add(name, self.env(name, **env), "run", "--no-api", "--queues", queues,
                         "--worker-id", name)

    async def start(self, *procs: Proc) -> None:
        await asyncio.gather(*(p.start() for p in procs))

    def record(self, kind: str, proc: Proc, at: float, releases: bool = False) -> Fault:
        fault = Fault(kind, proc.pid, at, proc.name, releases)
        self.faults.append(fault)
        print(f"  {kind} {proc.name} (pid {proc.pid}) at {at:.3f}")
        return fault

    def record_outage(self, kind: str, at: float, until: float) -> Fault:
        """A fault of no tickwork process that cuts off all their work from ``at`` to ``until``
        (the database down): it explains reruns of executions in flight during it, on any
        process, and nothing else."""
        fault = Fault(kind, 0, at, "every process", every_process=True, until=until)
        self.faults.append(fault)
        print(f"  {kind} from {at:.3f} to {until:.3f} ({until - at:.1f}s)")
        return fault

    def record_outside(self, kind: str, target: str, pid: int, at: float) -> Fault:
        """A fault of something outside the tickwork processes (``pid``: the redis-server,
        or this process for a proxy in it) that they must ride out without running anything
        twice, such as Redis hung or cut off (degraded mode): it explains no duplicate."""
        fault = Fault(kind, pid, at, target)
        self.faults.append(fault)
        print(f"  {kind} of {target} (pid {pid}) at {at:.3f}")
        return fault

    def kill9(self, proc: Proc) -> Fault:
        return self.record("kill -9", proc, proc.signal(signal.SIGKILL))

    async def sigterm(self, proc: Proc, within: float = 30.0) -> int:
        """Graceful stop: attempts it gives back are uncharged, so reruns keep their number."""
        self.record("SIGTERM", proc, proc.signal(signal.SIGTERM, group=False), releases=True)
        return await proc.wait_exit(within)

    async def stop_cleanly(self, proc: Proc, within: float = 30.0) -> int:
        """SIGTERM at the end of a run: not a fault."""
        proc.signal(signal.SIGTERM, group=False)
        return await proc.wait_exit(within)

    async def freeze(self, proc: Proc, seconds: float) -> Fault:
        """SIGSTOP, then SIGCONT ``seconds`` later: a paused process (GC, VM) comes back."""
        fault = self.record(f"SIGSTOP {seconds:g}s", proc, proc.signal(signal.SIGSTOP))
        await self.pause(seconds)
        proc.signal(signal.SIGCONT)
        return fault

    def note_deaths(self) -> None:
        """Record processes that died on their own (failpoints, poison jobs) as faults."""
        known = {f.pid for f in self.faults}
        for p in self.procs:
            if p.proc is None or p.exited_at is None or p.signalled or p.pid in known:
                continue
            at, kind = p.exited_at, "died"
            for line in p.lines:
                if m := FAILPOINT_LINE.search(line):
                    at, kind = float(m[3]), f"failpoint {m[1]}"
            self.record(kind, p, at)

    @staticmethod
    async def pause(seconds: float) -> None:
        """A fault's own duration (an outage, a freeze) or its seeded moment; never a wait for
        a condition (use ``settle``)."""
        await asyncio.sleep(seconds)

    # -- jobs --------------------------------------------------------------------------------

    async def client(self) -> AsyncClient:
        if self._client is None:
            self._client = await AsyncClient.open(self.database, migrate=False)
        return self._client

    def doc(self, name: str, schedule: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return ledger.doc(name, self.ledger, schedule, **kw)

    async def create(self, docs: list[dict[str, Any]], chunk: int = 2000) -> list[Job]:
        client = await self.client()
        jobs: list[Job] = []
        for i in range(0, len(docs), chunk):
            jobs += await client.create_jobs(docs[i:i + chunk])
        self.names.update({j.id: j.spec.name for j in jobs})
        return jobs

    def expect(self, jobs: Iterable[Job], since: datetime, until: datetime) -> dict[str, float]:
        new = expected_of(jobs, since, until)
        self.expected.update(new)
        return new

    # -- watching ----------------------------------------------------------------------------

    def executions(self) -> list[Execution]:
        out = []
        for r in ledger.read(self.ledger):
            job = self.names.get(r.job_id, r.job or r.job_id)
            out.append(Execution(
                occurrence=occurrence_id(job, r.scheduled_at), attempt=r.attempt, pid=r.pid,
                worker=r.worker, started=r.started_mono + self.mono_offset,
                ended=None if r.ended_mono is None else r.ended_mono + self.mono_offset,
                outcome=r.outcome, scheduled_at=r.scheduled_at, key=r.key))
        return out

    def done_count(self) -> int:
        """Occurrences with an execution that ended (any attempt)."""
        return ledger.count(self.ledger)

    def all_done(self) -> bool:
        """Every expected occurrence has an execution that ended (the cheap count first)."""
        if self.done_count() < len(self.expected):
            return False
        done = {e.occurrence for e in self.executions() if e.outcome is not None}
        return done >= self.expected.keys()

    async def all_settled(self) -> bool:
        """Every expected occurrence ran, and the store has settled each one (no attempt is
        still running or waiting for a retry, as one interrupted by a fault would be)."""
        if not self.all_done():
            return False
        states = await self.final_states()
        return all(states.get(o) in FINAL_STATES for o in self.expected)

    def all_done_but(self, n: int) -> bool:
        """All but ``n`` expected occurrences have an execution that ended."""
        done = {e.occurrence for e in self.executions() if e.outcome is not None}
        return len(self.expected.keys() - done) <= n

    async def settle(self, done: Callable[[], bool | Awaitable[bool]], within: float,
                     what: str = "every expected occurrence to run") -> float:
        """Wait until ``done()``: looked at after log lines of any process (and at least every
        quarter second, for progress that logs nothing, such as a job's ledger row of a
        sub-second execution). Returns the seconds it took."""
        loop = asyncio.get_running_loop()
        begin = loop.time()
        while True:
            self.lines.clear()
            result = done()
            if not isinstance(result, bool):
                result = await result
            if result:
                return loop.time() - begin
            left = begin + within - loop.time()
            if left <= 0:
                tails = "\n".join(p.tail(8) for p in self.procs)
                raise AssertionError(
                    f"fault run {self.name!r} (seed {self.seed}): no {what} within {within}s "
                    f"({self.done_count()} of {len(self.expected)} done; not done: "
                    f"{await self.not_done()}); logs:\n{tails}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.lines.wait(), min(0.25, left))

    async def not_done(self, limit: int = 5) -> dict[str, str]:
        """Up to ``limit`` expected occurrences without an ended execution, with their state."""
        done = {e.occurrence for e in self.executions() if e.outcome is not None}
        states = await self.final_states()
        missing = [o for o in sorted(self.expected) if o not in done][:limit]
        return {o: states.get(o, "absent") for o in missing}

    async def final_states(self) -> dict[str, str]:
        """occurrence -> state, from the store (for G3's accounting of what did not run)."""
        store = (await self.client()).store
        states: dict[str, str] = {}
        before: tuple[datetime, str] | None = None
        while True:
            page = await store.occurrence_list(OccurrenceListParams(
                before=before, limit=1000, newest_first=True))
            for o in page:
                if o.job_id in self.names:
                    states[occurrence_id(self.names[o.job_id], o.scheduled_at)] = o.state.value
            if len(page) < 1000:
                return states
            before = (page[-1].scheduled_at, page[-1].job_id)

    # -- the verdict -------------------------------------------------------------------------

    async def verdict(self, explained_budget: int | None = None) -> Report:
        self.note_deaths()
        report = classify(self.expected, self.executions(), faults=self.faults,
                          final_states=await self.final_states(),
                          explained_budget=explained_budget, seed=self.seed, name=self.name)
        print(report.render())
        return report

    async def check(self, explained_budget: int | None = None) -> Report:
        report = await self.verdict(explained_budget)
        assert report.passed, report.render()
        return report
