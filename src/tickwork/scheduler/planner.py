"""The planner: turns due jobs into occurrences, a bounded batch per tick.

Each tick loads the jobs whose next run falls within ``now + horizon``, materialises every fire
time up to the horizon (insert-if-absent; older than the catch-up window means ``missed``) and
moves each job's next run on, all in one store transaction.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta

from tickwork.clock import Clock
from tickwork.drivers.base import (
    JobAdvance,
    JobAdvanceManyParams,
    JobDueParams,
    NewOccurrence,
    Store,
)
from tickwork.drivers.calendars import CalendarCache
from tickwork.models import Job, OccurrenceState, ScheduleSpec
from tickwork.scheduler.loop import Loop
from tickwork.schedules import Schedule, compile_schedule, for_job, jitter_offset
from tickwork.schedules.calendars import Calendar

log = logging.getLogger("tickwork.planner")


class ScheduleCache:
    """Compiled schedules by definition, so a tick does not re-parse cron strings.

    Keyed by the schedule itself (a frozen value), not by job: the jobs that share a schedule
    share one entry, and a changed schedule is a new key. One-off (``at``) schedules are built
    each time and never kept: each is planned once, and building one takes about a
    microsecond. So the cache holds at most ``size`` distinct recurring schedules (least
    recently used out first), however many jobs are defined or due.
    """

    def __init__(self, size: int = 4096) -> None:
        if size < 1:
            raise ValueError(f"size must be at least 1 (got {size})")
        self.size = size
        self._compile = functools.lru_cache(maxsize=size)(compile_schedule)

    def get(self, spec: ScheduleSpec) -> Schedule:
        if spec.type == "at":
            return compile_schedule(spec)
        return self._compile(spec)

    def __len__(self) -> int:
        return self._compile.cache_info().currsize


class CalendarScheduleCache:
    """Compiled schedules that name calendars, by definition and by the version of each
    calendar they name: a changed calendar is a new key. At most ``size`` entries (all
    forgotten at once when full)."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self.calendars = CalendarCache()
        self._compiled: dict[tuple[object, ...], Schedule] = {}

    def get(self, spec: ScheduleSpec, calendars: dict[str, Calendar]) -> Schedule:
        key = (spec, *(self.calendars.stamp(name) for name in spec.calendars))
        found = self._compiled.get(key)
        if found is None:
            missing = [name for name in spec.calendars if name not in calendars]
            if missing:
                log.warning("a schedule names calendar(s) %s, which do not exist: taken as "
                            "empty", ", ".join(missing))
            if len(self._compiled) >= self.size:
                self._compiled.clear()
            found = self._compiled[key] = compile_schedule(spec, calendars)
        return found


def plan_job(job: Job, schedule: Schedule, now: datetime, until: datetime,
             limit: int, *, bursts: BurstSmoother | None = None) -> JobAdvance:
    """The occurrences of ``job`` from its next run up to ``until``, at most ``limit`` of them.

    A schedule that names calendars checks its next run first: a calendar may have changed
    since it was computed. Each occurrence is due at its scheduled time plus the job's jitter;
    with ``bursts``, plus the jitter only when its instant is a burst (see BurstSmoother)."""
    assert job.next_run_at is not None  # job_due returns only jobs with a next run
    spec = job.spec
    catchup = timedelta(seconds=spec.catchup_window_seconds)
    occurrences: list[NewOccurrence] = []
    schedule, t = _start(job, schedule)
    while t is not None and t <= until and len(occurrences) < limit:
        state = OccurrenceState.MISSED if now - t > catchup else OccurrenceState.SCHEDULED
        occurrences.append(NewOccurrence(
            job_id=job.id, scheduled_at=t,
            due_at=t + (jitter_offset(job.id, t, spec.schedule.jitter_seconds)
                        if bursts is None or bursts.is_burst(t) else NO_DELAY),
            queue=spec.queue, priority=spec.priority, max_attempts=spec.retry.max_attempts,
            state=state,
        ))
        t = schedule.next_after(t)
    return JobAdvance(job_id=job.id, expected_next_run_at=job.next_run_at,
                      occurrences=occurrences, next_run_at=t)


NO_DELAY = timedelta(0)


def _start(job: Job, schedule: Schedule) -> tuple[Schedule, datetime | None]:
    """The job's own schedule and its first fire time to plan. A calendar may have changed
    since the next run was computed; an automatic offset is the job's own, and a next run
    stored without it (no id yet) moves on to it."""
    if job.spec.schedule.offset_auto:
        schedule = for_job(schedule, job.id)
    elif not (job.spec.schedule.exclude or job.spec.schedule.only):
        return schedule, job.next_run_at
    assert job.next_run_at is not None  # job_due returns only jobs with a next run
    return schedule, schedule.first_at_or_after(job.next_run_at)


class BurstSmoother:
    """Which instants of a shard's plan are bursts: at least ``threshold`` occurrences
    scheduled at that one instant, counted over the passes that planned them.

    With a smoother, a job that allows jitter (``jitter_seconds``) is delayed by it only at a
    burst, so a top-of-the-minute crowd spreads over its jitter while a lone run starts on
    time. The delay itself is ``jitter_offset``'s: the same for the same occurrence on every
    instance, in ``[0, jitter_seconds)``, never before the scheduled time. Counts are kept
    for instants not yet past (at most ``size`` of them)."""

    def __init__(self, threshold: int, size: int = 100_000) -> None:
        if threshold < 1:
            raise ValueError(f"threshold must be at least 1 (got {threshold})")
        self.threshold = threshold
        self.size = size
        self._counts: dict[datetime, int] = {}

    def count(self, jobs: Sequence[tuple[Job, Schedule, datetime]], now: datetime,
              limit: int) -> None:
        """Count the fire times of ``jobs`` from their next run up to each one's ``until``
        (at most ``limit`` of each, as plan_job plans them)."""
        if len(self._counts) >= self.size:
            self._counts = {t: n for t, n in self._counts.items() if t >= now}
        counts = self._counts
        for job, schedule, until in jobs:
            schedule, t = _start(job, schedule)  # noqa: PLW2901  (the job's own)
            seen = 0
            while t is not None and t <= until and seen < limit:
                counts[t] = counts.get(t, 0) + 1
                seen += 1
                t = schedule.next_after(t)

    def is_burst(self, t: datetime) -> bool:
        return self._counts.get(t, 0) >= self.threshold


class Planner(Loop):
    name = "planner"

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        horizon_seconds: float = 5.0,
        one_off_horizon_seconds: float | None = None,
        interval_seconds: float = 1.0,
        batch_size: int = 500,
        per_job_limit: int = 1000,
        on_planned: Callable[[int, datetime], None] | None = None,
        shards: Callable[[], frozenset[int]] | None = None,
        after_commit: Callable[[Sequence[JobAdvance]], Awaitable[None]] | None = None,
        burst_threshold: int = 0,
        lanes: int = 1,
    ) -> None:
        """``one_off_horizon_seconds``: how far ahead one-off jobs (schedule type ``at``) are
        planned (None, or no more than ``horizon_seconds``: as far as the others). A one-off job has
        one run, so planning it early costs nothing more, and a burst of them due at one
        instant is planned before that instant rather than in the seconds around it.
        ``on_planned``: told how many occurrences a pass inserted and the earliest due time
        among them (metrics count them; the embedded service wakes its workers).
        ``shards``: the shards this planner may plan now (a ShardLeaser's); None: all.
        ``after_commit``: awaited with the advances once the store committed them (the Redis
        deployment adds their occurrences to the due set); it must not raise.
        ``burst_threshold``: 0 delays every occurrence of a job with jitter by it; N > 0
        only those at an instant this planner plans N or more occurrences for (a burst).
        ``lanes``: with ``shards``, a pass plans this many disjoint parts of them at once, each
        its own read, plan and write, so one part's planning runs while another's statements
        wait for the store (one part when fewer shards are held)."""
        if lanes < 1:
            raise ValueError(f"lanes must be at least 1 (got {lanes})")
        if horizon_seconds < interval_seconds:
            raise ValueError(
                f"horizon_seconds ({horizon_seconds}) must be at least "
                f"interval_seconds ({interval_seconds})")
        super().__init__(clock=clock, interval_seconds=interval_seconds)
        self.store = store
        self.horizon = timedelta(seconds=horizon_seconds)
        self.one_off_horizon = (
            None if one_off_horizon_seconds is None or one_off_horizon_seconds <= horizon_seconds
            else timedelta(seconds=one_off_horizon_seconds))
        self.batch_size = batch_size
        self.per_job_limit = per_job_limit
        self.on_planned = on_planned
        self.schedules = ScheduleCache()
        self.calendar_schedules = CalendarScheduleCache()
        self.shards = shards
        self.after_commit = after_commit
        self.bursts = BurstSmoother(burst_threshold) if burst_threshold else None
        self.lanes = lanes

    async def run_once(self, now: datetime) -> tuple[int, bool]:
        """Plan one batch (of each lane). Returns (occurrences inserted, whether more jobs may
        be due)."""
        shards = None if self.shards is None else self.shards()
        if shards is not None and not shards:
            return 0, False  # no shard leased (yet): another scheduler plans them
        parts = lanes_of(shards, self.lanes)
        if len(parts) == 1:
            return await self._plan_batch(now, parts[0])
        # Every lane's pass ends before the next pass starts; the first failure is raised.
        done = await asyncio.gather(*(self._plan_batch(now, part) for part in parts),
                                    return_exceptions=True)
        for result in done:
            if isinstance(result, BaseException):
                raise result
        passes = [r for r in done if not isinstance(r, BaseException)]
        return sum(n for n, _ in passes), any(more for _, more in passes)

    async def _plan_batch(self, now: datetime, shards: frozenset[int] | None
                          ) -> tuple[int, bool]:
        until = now + self.horizon
        until_one_off = None if self.one_off_horizon is None else now + self.one_off_horizon
        jobs = await self.store.job_due(JobDueParams(
            until=until, limit=self.batch_size, shards=shards, until_one_off=until_one_off))
        planned: list[tuple[Job, Schedule, datetime]] = []
        calendars: dict[str, Calendar] | None = None
        for job in jobs:
            try:
                if job.spec.schedule.exclude or job.spec.schedule.only:
                    if calendars is None:  # read once a pass, and only when a job needs them
                        calendars = await self.calendar_schedules.calendars.load(self.store)
                    schedule = self.calendar_schedules.get(job.spec.schedule, calendars)
                else:
                    schedule = self.schedules.get(job.spec.schedule)
            except ValueError as exc:  # stored before a rule tightened: say so, do not stall
                log.error("job %s (%s) has a schedule that no longer compiles: %s",
                          job.spec.name, job.id, exc)
                continue
            planned.append((job, schedule, until_one_off if until_one_off is not None
                            and job.spec.schedule.one_off else until))
        if self.bursts is not None:
            self.bursts.count(planned, now, self.per_job_limit)
        advances = [plan_job(job, schedule, now, job_until, self.per_job_limit,
                             bursts=self.bursts) for job, schedule, job_until in planned]
        inserted = 0
        if advances:
            inserted = await self.store.job_advance_many(
                JobAdvanceManyParams(advances=advances, now=now))
            if self.after_commit is not None:
                await self.after_commit(advances)
            if inserted and self.on_planned is not None:
                earliest = min(o.due_at for a in advances for o in a.occurrences)
                self.on_planned(inserted, earliest)
        return inserted, len(jobs) == self.batch_size and bool(advances)

    async def tick(self, now: datetime) -> bool:
        return (await self.run_once(now))[1]


def lanes_of(shards: frozenset[int] | None, lanes: int) -> list[frozenset[int] | None]:
    """``shards`` dealt into at most ``lanes`` disjoint, non-empty parts (in shard order, one
    at a time, so the parts differ in size by one at most); None (every shard) stays whole."""
    if shards is None or lanes == 1 or len(shards) < 2:
        return [shards]
    ordered = sorted(shards)
    return [frozenset(ordered[i::lanes]) for i in range(min(lanes, len(ordered)))]
