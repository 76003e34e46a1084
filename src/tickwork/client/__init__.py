"""The client users call to create and manage jobs and read their runs.

``AsyncClient`` is the core; ``Client`` is a synchronous facade over it that runs the async core
on a private event loop in a background thread, so it works from any code, including code that
already runs an event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from tickwork.client.calendars import (
    CalendarChange,
    CalendarMethods,
    calendar_first_run,
    check_calendars,
)
from tickwork.clock import Clock, SystemClock
from tickwork.document import (
    QUEUE_NAME,
    QUEUE_NAME_RULE,
    BulkParser,
    check_runs,
    first_run,
    parse_job_document,
    to_spec,
)
from tickwork.document.text import not_unicode
from tickwork.drivers import open_driver
from tickwork.drivers.admin import (
    AdminStore,
    JobStatus,
    JobStatusParams,
    QueueInfo,
    QueueListParams,
    QueueSetPausedParams,
    Stats,
    StatsParams,
)
from tickwork.drivers.alerts import MAX_ALERTS, AlertListParams, StoredAlert
from tickwork.drivers.base import (
    MAX_BATCH,
    JobCreateManyParams,
    JobCreateParams,
    JobDeleteParams,
    JobListParams,
    JobSetPausedParams,
    JobUpdateParams,
    NewOccurrence,
    OccurrenceInsertParams,
    OccurrenceListParams,
    Store,
)
from tickwork.drivers.calendars import CalendarCache, StoredCalendar
from tickwork.errors import ValidationError
from tickwork.executors.admission import JobPolicy
from tickwork.models import (
    Attempt,
    Job,
    JobSpec,
    Occurrence,
    OccurrenceState,
    ScheduleSpec,
    Trigger,
)
from tickwork.schedules import preview
from tickwork.schedules.calendars import Calendar
from tickwork.schedules.structured import Fire

T = TypeVar("T")
JobInput = Mapping[str, Any] | JobSpec


@dataclass(frozen=True, slots=True)
class Backfill:
    """What a backfill stored: one occurrence per fire time, ``created`` of them new."""

    occurrences: list[Occurrence]
    created: int


def to_specs(jobs: Iterable[JobInput],
             check: Callable[[JobSpec], None] | None = None) -> Iterator[JobSpec]:
    """Each job's spec, as it is asked for, passed through ``check``; a problem is named
    with the job's index, as ``[3].schedule.cron``."""
    parser = BulkParser()
    for index, job in enumerate(jobs):
        try:
            spec = job if isinstance(job, JobSpec) else parser.spec(job)
            if check is not None:
                check(spec)
        except ValidationError as exc:
            prefix = f"[{index}]."
            raise ValidationError(f"{prefix}{exc.field}" if exc.field else prefix,
                                  exc.reason) from exc
        yield spec


def create_params(specs: Iterable[JobSpec], now: datetime,
                  calendars: Mapping[str, Calendar] | None = None) -> Iterator[JobCreateParams]:
    """What the store creates for ``specs``: each job's first run is computed (and checked to
    come) once per distinct schedule object (parsing hands out one per distinct schedule
    document), with ``calendars`` for schedules that name some."""
    firsts: dict[int, tuple[ScheduleSpec, datetime | None]] = {}
    for index, spec in enumerate(specs):
        known = firsts.get(id(spec.schedule))
        if known is None:  # the tuple keeps the schedule alive, so no other takes its id
            known = (spec.schedule, calendar_first_run(spec, now, calendars))
            try:
                check_runs(spec, known[1], now)
            except ValidationError as exc:
                raise ValidationError(f"[{index}].{exc.field}", exc.reason) from exc
            firsts[id(spec.schedule)] = known
        yield JobCreateParams(spec=spec, next_run_at=known[1], now=now)


def _check_texts(**fields: str | None) -> None:
    """ValidationError naming the first of ``fields`` that is not valid Unicode text."""
    for name, value in fields.items():
        reason = None if value is None else not_unicode(value)
        if reason is not None:
            raise ValidationError(name, reason)


class AsyncClient(CalendarMethods):
    def __init__(self, store: Store, *, clock: Clock | None = None,
                 on_change: Callable[[], None] | None = None,
                 after_insert: Callable[[Sequence[Occurrence]], Awaitable[object]] | None = None,
                 policy: JobPolicy | None = None) -> None:
        self.store = store
        # What this process knows of what workers may run: a job that could never run is
        # refused when it is created or changed (the worker checks again before each attempt).
        self.policy = policy
        self.clock = clock or SystemClock()
        self.on_change = on_change  # the embedded service wakes its workers through this
        # Triggers and backfills hand what they stored to this, once committed: with Redis
        # dispatch, DueFeeder.add_waiting (it logs a failure; the reconciler repairs it).
        self.after_insert = after_insert
        self._admin: AdminStore | None = None
        self._calendar_cache = CalendarCache()
        self._closers: list[Callable[[], Awaitable[object]]] = []

    @property
    def admin(self) -> AdminStore:
        """Queues, aggregates and tokens: the store's admin driver (drivers/admin.py)."""
        if self._admin is None:
            self._admin = self.store.admin()
        return self._admin

    @classmethod
    async def open(cls, database: str = "sqlite:///tickwork.db", *, clock: Clock | None = None,
                   migrate: bool = True, policy: JobPolicy | None = None) -> AsyncClient:
        store = open_driver(database).store
        if migrate:
            await store.migrate()
        return cls(store, clock=clock, policy=policy)

    def on_close(self, close: Callable[[], Awaitable[object]]) -> None:
        """Also run ``close`` when this client closes (e.g. an attached dispatch)."""
        self._closers.append(close)

    async def close(self) -> None:
        for close in reversed(self._closers):
            await close()
        await self.store.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # -- jobs --------------------------------------------------------------------------------

    async def create_job(self, job: JobInput) -> Job:
        spec = to_spec(job)
        self._check(spec)
        now = self.clock.now()
        next_run = await self._first_run(spec, now)
        check_runs(spec, next_run, now)
        created = await self.store.job_create(
            JobCreateParams(spec=spec, next_run_at=next_run, now=now))
        self._changed()
        return created

    async def create_jobs(self, jobs: Iterable[JobInput]) -> list[Job]:
        """Many jobs in one store transaction: all are created, or none (errors name the index).

        Each document is validated as the store takes it, so the store writes the first jobs
        while later documents are still being checked; an invalid one rolls back them all.
        """
        now = self.clock.now()
        calendars = await self.calendar_map()

        def check(spec: JobSpec) -> None:
            self._check(spec)
            check_calendars(spec, calendars)

        created = await self.store.job_create_many(
            JobCreateManyParams(jobs=create_params(to_specs(jobs, check), now, calendars)))
        self._changed()
        return created

    def _check(self, spec: JobSpec) -> None:
        if self.policy is not None:
            self.policy.check(spec)

    async def _first_run(self, spec: JobSpec, now: datetime) -> datetime | None:
        """``first_run``; a schedule that names calendars is checked to name existing ones."""
        if not spec.schedule.calendars:
            return first_run(spec, now)
        calendars = await self.calendar_map()
        check_calendars(spec, calendars)
        return calendar_first_run(spec, now, calendars)

    async def get_job(self, ref: str) -> Job:
        return await self._job(ref)

    async def _job(self, ref: str) -> Job:
        """By id or name; a ref that is not valid Unicode text is a ValidationError, as any
        other bad input, never an encoding error from the driver."""
        _check_texts(job=ref)
        return await self.store.job_get(ref)

    async def list_jobs(self, *, queue: str | None = None, tag: str | None = None,
                        kind: str | None = None, name_contains: str | None = None,
                        paused: bool | None = None, after_name: str | None = None,
                        limit: int = 100) -> list[Job]:
        _check_texts(queue=queue, tag=tag, kind=kind, name_contains=name_contains,
                     after_name=after_name)
        """Up to ``limit`` jobs by name, read in pages of the store's batch bound."""
        found: list[Job] = []
        while len(found) < limit:
            want = min(limit - len(found), MAX_BATCH)
            page = await self.store.job_list(JobListParams(
                queue=queue, tag=tag, kind=kind, name_contains=name_contains, paused=paused,
                after_name=found[-1].spec.name if found else after_name, limit=want))
            found.extend(page)
            if len(page) < want:
                break
        return found

    async def update_job(self, ref: str, changes: Mapping[str, Any]) -> Job:
        """Change some fields of a job; the others keep their values."""
        current = await self._job(ref)
        spec = parse_job_document(changes, defaults=current.spec).spec
        if (spec.kind, spec.payload) != (current.spec.kind, current.spec.payload):
            self._check(spec)
        now = self.clock.now()
        next_run = current.next_run_at
        if spec.schedule != current.spec.schedule:
            next_run = await self._first_run(spec, now)
            check_runs(spec, next_run, now)
        elif next_run is None:
            next_run = await self._first_run(spec, now)
        updated = await self.store.job_update(
            JobUpdateParams(id=current.id, spec=spec, next_run_at=next_run, now=now))
        self._changed()
        return updated

    async def pause_job(self, ref: str) -> Job:
        job = await self._job(ref)
        return await self.store.job_set_paused(JobSetPausedParams(
            id=job.id, paused=True, next_run_at=job.next_run_at, now=self.clock.now()))

    async def resume_job(self, ref: str) -> Job:
        """Resume from now on: fire times that fell while paused are not made up."""
        job = await self._job(ref)
        now = self.clock.now()
        next_run = job.next_run_at
        if job.spec.schedule.type != "at":
            next_run = (await self.schedule_of(job.spec)).first_at_or_after(now)
        resumed = await self.store.job_set_paused(JobSetPausedParams(
            id=job.id, paused=False, next_run_at=next_run, now=now))
        self._changed()
        return resumed

    async def trigger_job(self, ref: str) -> Occurrence:
        """Run the job now, once, outside its schedule (with an idempotency key of its own)."""
        job = await self._job(ref)
        now = self.clock.now()
        stored = await self.store.occurrence_insert(OccurrenceInsertParams(occurrences=[
            NewOccurrence(job_id=job.id, scheduled_at=now, due_at=now, queue=job.spec.queue,
                          priority=job.spec.priority, max_attempts=job.spec.retry.max_attempts,
                          trigger=Trigger.MANUAL)], now=now))
        if self.after_insert is not None:
            await self.after_insert(stored)
        self._changed()
        return stored[0]

    async def delete_job(self, ref: str) -> None:
        job = await self._job(ref)
        await self.store.job_delete(JobDeleteParams(id=job.id, now=self.clock.now()))

    async def preview(self, job: JobInput | str, n: int = 5,
                      after: datetime | None = None) -> list[datetime]:
        spec = (await self._job(job)).spec if isinstance(job, str) else to_spec(job)
        return preview(await self.schedule_of(spec), after or self.clock.now(), n)

    async def backfill(self, ref: str, since: datetime, until: datetime, *,
                       limit: int = MAX_BATCH) -> Backfill:
        """Occurrences for each fire time in ``[since, until)``, due now, with trigger
        ``backfill``. Idempotent: a fire time that already has an occurrence keeps it."""
        job = await self._job(ref)
        now = self.clock.now()
        if since >= until:
            raise ValidationError("until", "must be after 'from'")
        if until > now:
            raise ValidationError("until", "must not be in the future; a backfill fills the past")
        bound = min(limit, MAX_BATCH)
        schedule = await self.schedule_of(job.spec)
        times: list[datetime] = []
        t = schedule.first_at_or_after(since)
        while t is not None and t < until:
            if len(times) == bound:
                raise ValidationError("until", f"the range has more than {bound} fire times; "
                                      "backfill it in smaller ranges")
            times.append(t)
            t = schedule.next_after(t)
        if not times:
            return Backfill(occurrences=[], created=0)
        before = await self.store.occurrence_list(OccurrenceListParams(
            job_id=job.id, since=times[0], until=times[-1] + timedelta(microseconds=1),
            limit=MAX_BATCH))
        existing = {o.scheduled_at for o in before}
        stored = await self.store.occurrence_insert(OccurrenceInsertParams(occurrences=[
            NewOccurrence(job_id=job.id, scheduled_at=t, due_at=now, queue=job.spec.queue,
                          priority=job.spec.priority, max_attempts=job.spec.retry.max_attempts,
                          trigger=Trigger.BACKFILL) for t in times], now=now))
        created = sum(1 for t in times if t not in existing)  # for the report only
        if self.after_insert is not None:
            await self.after_insert(stored)
        self._changed()
        return Backfill(occurrences=stored, created=created)

    async def job_status(self, ref: str, last_n: int = 100) -> tuple[Job, JobStatus]:
        """The job and how it has been doing over its last ``last_n`` finished runs."""
        job = await self._job(ref)
        status = await self.admin.job_status_get(
            JobStatusParams(job_id=job.id, now=self.clock.now(), last_n=last_n))
        return job, status

    # -- queues and stats --------------------------------------------------------------------

    async def list_queues(self) -> list[QueueInfo]:
        return await self.admin.queue_list(QueueListParams(now=self.clock.now()))

    async def pause_queue(self, name: str) -> QueueInfo:
        """Stop claims from this queue (running attempts finish); planning goes on."""
        return await self._set_queue_paused(name, paused=True)

    async def resume_queue(self, name: str) -> QueueInfo:
        info = await self._set_queue_paused(name, paused=False)
        self._changed()
        return info

    async def _set_queue_paused(self, name: str, *, paused: bool) -> QueueInfo:
        if not QUEUE_NAME.fullmatch(name):
            raise ValidationError("queue", QUEUE_NAME_RULE)
        return await self.admin.queue_set_paused(
            QueueSetPausedParams(name=name, paused=paused, now=self.clock.now()))

    async def stats(self, window_seconds: int = 3600) -> Stats:
        return await self.admin.stats_get(
            StatsParams(now=self.clock.now(), window_seconds=window_seconds))

    # -- runs --------------------------------------------------------------------------------

    async def list_runs(self, *, job: str | None = None, queue: str | None = None,
                        states: Sequence[str] = (),
                        since: datetime | None = None, until: datetime | None = None,
                        before: tuple[datetime, str] | None = None, limit: int = 50,
                        newest_first: bool = True) -> list[Occurrence]:
        """Up to ``limit`` runs, read in pages of the store's batch bound; ``before`` is the
        (scheduled_at, job_id) of the row the listing continues after."""
        job_id = (await self._job(job)).id if job else None
        found: list[Occurrence] = []
        while len(found) < limit:
            want = min(limit - len(found), MAX_BATCH)
            last = (found[-1].scheduled_at, found[-1].job_id) if found else before
            page = await self.store.occurrence_list(OccurrenceListParams(
                job_id=job_id, queue=queue, states=[OccurrenceState(s) for s in states],
                since=since,
                until=until, before=last, limit=want, newest_first=newest_first))
            found.extend(page)
            if len(page) < want:
                break
        return found

    async def list_alerts(self, *, job: str | None = None, state: str | None = None,
                          before: tuple[datetime, str] | None = None,
                          limit: int = 50) -> list[StoredAlert]:
        """Alerts, newest first, with their deliveries; ``state`` is firing or resolved;
        ``before`` is the (fired_at, id) of the row the listing continues after."""
        job_id = (await self._job(job)).id if job else None
        return await self.store.alert_list(AlertListParams(
            job_id=job_id, state=state, before=before, limit=min(limit, MAX_ALERTS)))

    async def get_run(self, job: str, scheduled_at: datetime) -> tuple[Occurrence, list[Attempt]]:
        job_id = (await self._job(job)).id
        occurrence = await self.store.occurrence_get(job_id, scheduled_at)
        return occurrence, await self.store.attempt_list(job_id, scheduled_at)


class Client:
    """Synchronous facade: ``with Client.open("sqlite:///tickwork.db") as c: c.create_job(...)``."""

    def __init__(self, inner: AsyncClient, loop: asyncio.AbstractEventLoop,
                 thread: threading.Thread) -> None:
        self._inner = inner
        self._loop = loop
        self._thread = thread

    @classmethod
    def open(cls, database: str = "sqlite:///tickwork.db", *, clock: Clock | None = None,
             migrate: bool = True) -> Client:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="tickwork-client", daemon=True)
        thread.start()
        try:
            inner = asyncio.run_coroutine_threadsafe(
                AsyncClient.open(database, clock=clock, migrate=migrate), loop).result()
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
            raise
        return cls(inner, loop, thread)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        self._run(self._inner.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def create_job(self, job: JobInput) -> Job:
        return self._run(self._inner.create_job(job))

    def create_jobs(self, jobs: Iterable[JobInput]) -> list[Job]:
        return self._run(self._inner.create_jobs(list(jobs)))

    def get_job(self, ref: str) -> Job:
        return self._run(self._inner.get_job(ref))

    def list_jobs(self, **filters: Any) -> list[Job]:
        return self._run(self._inner.list_jobs(**filters))

    def update_job(self, ref: str, changes: Mapping[str, Any]) -> Job:
        return self._run(self._inner.update_job(ref, changes))

    def pause_job(self, ref: str) -> Job:
        return self._run(self._inner.pause_job(ref))

    def resume_job(self, ref: str) -> Job:
        return self._run(self._inner.resume_job(ref))

    def trigger_job(self, ref: str) -> Occurrence:
        return self._run(self._inner.trigger_job(ref))

    def delete_job(self, ref: str) -> None:
        self._run(self._inner.delete_job(ref))

    def preview(self, job: JobInput | str, n: int = 5,
                after: datetime | None = None) -> list[datetime]:
        return self._run(self._inner.preview(job, n, after))

    def preview_fires(self, job: JobInput | str, n: int = 5,
                      after: datetime | None = None) -> list[Fire]:
        return self._run(self._inner.preview_fires(job, n, after))

    def list_calendars(self) -> list[StoredCalendar]:
        return self._run(self._inner.list_calendars())

    def get_calendar(self, name: str) -> StoredCalendar:
        return self._run(self._inner.get_calendar(name))

    def create_calendar(self, doc: Mapping[str, Any]) -> StoredCalendar:
        return self._run(self._inner.create_calendar(doc))

    def update_calendar(self, name: str, doc: Mapping[str, Any]) -> CalendarChange:
        return self._run(self._inner.update_calendar(name, doc))

    def delete_calendar(self, name: str) -> None:
        self._run(self._inner.delete_calendar(name))

    def import_calendar(self, name: str, ics: str, *, description: str | None = None,
                        replace: bool = False) -> CalendarChange:
        return self._run(self._inner.import_calendar(name, ics, description=description,
                                                     replace=replace))

    def calendar_jobs(self, name: str) -> list[Job]:
        return self._run(self._inner.calendar_jobs(name))

    def list_runs(self, **filters: Any) -> list[Occurrence]:
        return self._run(self._inner.list_runs(**filters))

    def list_alerts(self, **filters: Any) -> list[StoredAlert]:
        return self._run(self._inner.list_alerts(**filters))

    def get_run(self, job: str, scheduled_at: datetime) -> tuple[Occurrence, list[Attempt]]:
        return self._run(self._inner.get_run(job, scheduled_at))



