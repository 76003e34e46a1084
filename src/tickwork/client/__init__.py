"""The client users call to create and manage jobs and read their runs.

``AsyncClient`` is the core; ``Client`` is a synchronous facade over it that runs the async core
on a private event loop in a background thread, so it works from any code, including code that
already runs an event loop.
"""

from __future__ import annotations

import copy
from collections.abc import (
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from tickwork.client.calendars import (
    CalendarMethods,
    calendar_first_run,
    check_calendars,
)
from tickwork.client.chains import check_chains
from tickwork.client.namespaces import NamespaceMethods, check_namespace
from tickwork.client.oneoff import EnqueueMethods
from tickwork.client.owners import owner_check
from tickwork.client.queues import QueueMethods
from tickwork.client.quotas import CreateGuard, check_run_quota, namespace_info
from tickwork.client.references import check_secrets, secret_check
from tickwork.client.runs import RunMethods
from tickwork.client.specs import (
    JobInput,
    check_texts,
    create_params,
    has_chain,
    os_user,
    overlap_choice,
    to_specs,
    versioned,
)
from tickwork.clock import Clock, SystemClock
from tickwork.document import (
    check_runs,
    first_run,
    parse_job_document,
    to_spec,
)
from tickwork.document.render import spec_diff
from tickwork.drivers import open_driver
from tickwork.drivers.admin import (
    AdminStore,
    JobStatus,
    JobStatusParams,
)
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
from tickwork.drivers.calendars import CalendarCache
from tickwork.drivers.codec import new_job_id
from tickwork.drivers.namespaces import DEFAULT_NAMESPACE
from tickwork.errors import JobNotFound, ValidationError
from tickwork.executors.admission import JobPolicy
from tickwork.models import (
    AuditAction,
    Backfill,
    Job,
    JobSpec,
    Occurrence,
    Overlap,
    Trigger,
)
from tickwork.schedules import preview


class AsyncClient(CalendarMethods, EnqueueMethods, NamespaceMethods, QueueMethods, RunMethods):
    def __init__(self, store: Store, *, clock: Clock | None = None,
                 on_change: Callable[[], None] | None = None,
                 after_insert: Callable[[Sequence[Occurrence]], Awaitable[object]] | None = None,
                 policy: JobPolicy | None = None, actor: str | None = None,
                 on_cancel: Callable[[], None] | None = None,
                 namespace: str | None = None) -> None:
        self.store = store
        # The namespace this client sees and changes; None (the default): every namespace,
        # and the jobs it creates and the names it looks up are in ``default`` (ids in any;
        # runs of purged jobs, whose namespace went with them, are listed only here).
        # ``scoped`` gives a view on another one.
        self.namespace = check_namespace(namespace) if namespace is not None else None
        # Who the audit trail names for changes made through this client, unless a call
        # names someone else (the API names the token): by default the OS user.
        self.actor = actor if actor is not None else os_user()
        # What this process knows of what workers may run: a job that could never run is
        # refused when it is created or changed (the worker checks again before each attempt).
        self.policy = policy
        self.clock = clock or SystemClock()
        self.on_change = on_change  # the embedded service wakes its workers through this
        # ... and heartbeats at once through this, so a cancelled run stops without delay
        self.on_cancel = on_cancel
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
                   migrate: bool = True, policy: JobPolicy | None = None,
                   actor: str | None = None,
                   namespace: str | None = None) -> AsyncClient:
        store = open_driver(database).store
        if migrate:
            await store.migrate()
        return cls(store, clock=clock, policy=policy, actor=actor, namespace=namespace)

    def scoped(self, namespace: str | None) -> AsyncClient:
        """This client (the same store, admin, clock and hooks) seeing only ``namespace``;
        None: every namespace. A view is cheap (the API makes one per request); closing
        either closes the store they share, so close only the client the views came from."""
        _ = self.admin  # made once, then shared by every view
        view = copy.copy(self)
        view.namespace = check_namespace(namespace) if namespace is not None else None
        return view

    @property
    def home(self) -> str:
        """Where this client creates jobs: its namespace, or ``default``."""
        return self.namespace if self.namespace is not None else DEFAULT_NAMESPACE

    def _who(self, actor: str | None) -> str | None:
        return actor if actor is not None else self.actor

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

    async def create_job(self, job: JobInput, *, actor: str | None = None,
                         version: int | None = None) -> Job:
        """With ``version``: only if newer than the last version applied to the job's name
        (StaleVersion otherwise), recorded with it (docs/streams.md#versions)."""
        spec = to_spec(job)
        self._check(spec)
        now = self.clock.now()
        guard = CreateGuard(await namespace_info(self.admin, self.home, now))
        guard.check(spec)
        (await owner_check(self.home, self.admin.limit_owners))(spec)
        await check_secrets(spec, self.home, self.admin.secret_names)
        if spec.chained:
            await check_chains([("", spec)], self._spec_named)
        job_id = new_job_id() if spec.schedule.offset_auto else None
        next_run = await self._first_run(spec, now, job_id)
        check_runs(spec, next_run, now)
        (created,) = await self.store.job_create_many(JobCreateManyParams(
            jobs=[JobCreateParams(spec=spec, next_run_at=next_run, now=now, id=job_id,
                                  actor=self._who(actor), namespace=self.home,
                                  version=versioned(spec.name, version, self.home))],
            max_jobs=guard.info.quotas.max_jobs))
        self._changed()
        return created

    async def create_jobs(self, jobs: Iterable[JobInput], *,
                          actor: str | None = None) -> list[Job]:
        """Many jobs in one store transaction: all are created, or none (errors name the index).

        Each document is validated as the store takes it, so the store writes the first jobs
        while later documents are still being checked; an invalid one rolls back them all.
        """
        now = self.clock.now()
        calendars = await self.calendar_map()
        guard = CreateGuard(await namespace_info(self.admin, self.home, now))
        secrets = await secret_check(self.home, self.admin.secret_names)
        owned = await owner_check(self.home, self.admin.limit_owners)

        def check(spec: JobSpec) -> None:
            self._check(spec)
            check_calendars(spec, calendars)
            guard.check(spec)
            owned(spec)
            secrets.check(spec)

        specs: Iterable[JobSpec]
        docs = jobs if isinstance(jobs, Sequence) else list(jobs)
        if any(has_chain(doc) for doc in docs):
            # Chains may name jobs of the same batch: all are parsed before any is checked.
            specs = list(to_specs(docs, check))
            await check_chains([(f"[{i}].", spec) for i, spec in enumerate(specs)],
                               self._spec_named)
        else:
            specs = to_specs(docs, check)
        created = await self.store.job_create_many(
            JobCreateManyParams(jobs=create_params(specs, now, calendars, self._who(actor),
                                                   self.home),
                                max_jobs=guard.info.quotas.max_jobs))
        self._changed()
        return created

    async def _spec_named(self, name: str) -> JobSpec | None:
        """The stored job named ``name`` (not one whose id it is), or None."""
        try:
            job = await self.store.job_get(name, self.home)
        except JobNotFound:
            return None
        return job.spec if job.spec.name == name else None

    def _check(self, spec: JobSpec) -> None:
        if self.policy is not None:
            self.policy.check(spec)

    async def _first_run(self, spec: JobSpec, now: datetime,
                         job_id: str | None = None) -> datetime | None:
        """``first_run``; a schedule that names calendars is checked to name existing ones."""
        if not spec.schedule.calendars:
            return first_run(spec, now, job_id)
        calendars = await self.calendar_map()
        check_calendars(spec, calendars)
        return calendar_first_run(spec, now, calendars)

    async def get_job(self, ref: str) -> Job:
        return await self._job(ref)

    async def _job(self, ref: str) -> Job:
        """By id or name; a ref that is not valid Unicode text is a ValidationError, as any
        other bad input, never an encoding error from the driver. A name is looked up in the
        client's namespace (``default`` for a client of every namespace: an id is found in
        any)."""
        check_texts(job=ref)
        job = await self.store.job_get(ref, self.namespace)
        if not self._named_here(job, ref):
            raise JobNotFound(ref)
        return job

    def _named_here(self, job: Job, ref: str) -> bool:
        """Whether ``ref`` names ``job`` for this client: its id, or its name in ``home``."""
        return job.id == ref or job.namespace == self.home

    async def list_jobs(self, *, queue: str | None = None, tag: str | None = None,
                        kind: str | None = None, name_contains: str | None = None,
                        paused: bool | None = None, after_name: str | None = None,
                        limit: int = 100) -> list[Job]:
        check_texts(queue=queue, tag=tag, kind=kind, name_contains=name_contains,
                     after_name=after_name)
        """Up to ``limit`` jobs by name, read in pages of the store's batch bound."""
        found: list[Job] = []
        while len(found) < limit:
            want = min(limit - len(found), MAX_BATCH)
            page = await self.store.job_list(JobListParams(
                queue=queue, tag=tag, kind=kind, name_contains=name_contains, paused=paused,
                after_name=found[-1].spec.name if found else after_name, limit=want,
                namespace=self.namespace))
            found.extend(page)
            if len(page) < want:
                break
        return found

    async def update_job(self, ref: str, changes: Mapping[str, Any], *,
                         actor: str | None = None) -> Job:
        """Change some fields of a job; the others keep their values."""
        current = await self._job(ref)
        spec = parse_job_document(changes, defaults=current.spec).spec
        return await self.replace_job(current, spec, actor=actor)

    async def replace_job(self, current: Job, spec: JobSpec, *, actor: str | None = None,
                          version: int | None = None) -> Job:
        """Make ``current`` the job ``spec`` describes; with ``version`` as create_job."""
        if spec.chained and (spec.chained != current.spec.chained
                             or spec.name != current.spec.name):
            await check_chains([("", spec)], self._spec_named)
        now = self.clock.now()
        if (spec.kind, spec.payload) != (current.spec.kind, current.spec.payload):
            self._check(spec)
            guard = CreateGuard(await namespace_info(self.admin, current.namespace, now))
            guard.info = replace(guard.info, jobs=guard.info.jobs - 1)  # this one is counted
            guard.check(spec)
        if (spec.queue, spec.limit_key) != (current.spec.queue, current.spec.limit_key):
            (await owner_check(current.namespace, self.admin.limit_owners))(spec)
        if (spec.payload, spec.alerts) != (current.spec.payload, current.spec.alerts):
            await check_secrets(spec, current.namespace, self.admin.secret_names)
        next_run = current.next_run_at
        rescheduled = spec.schedule != current.spec.schedule
        # A planned run carries its job's queue, priority and attempts: one not due yet (a
        # one-off job's is planned up to a minute ahead) is planned again with the new ones.
        moved = _planned_with(spec) != _planned_with(current.spec)
        if rescheduled:
            next_run = await self._first_run(spec, now, current.id)
            check_runs(spec, next_run, now)
        elif next_run is None or moved:
            next_run = await self._first_run(spec, now, current.id)
        updated = await self.store.job_update(
            JobUpdateParams(id=current.id, spec=spec, next_run_at=next_run, now=now,
                            replan=rescheduled or moved,
                            actor=self._who(actor), diff=spec_diff(current.spec, spec),
                            version=versioned(current.spec.name, version,
                                             current.namespace)))
        self._changed()
        return updated

    async def pause_job(self, ref: str, *, actor: str | None = None) -> Job:
        job = await self._job(ref)
        return await self.store.job_set_paused(JobSetPausedParams(
            id=job.id, paused=True, next_run_at=job.next_run_at, now=self.clock.now(),
            actor=self._who(actor)))

    async def resume_job(self, ref: str, *, actor: str | None = None) -> Job:
        """Resume from now on: fire times that fell while paused are not made up."""
        job = await self._job(ref)
        now = self.clock.now()
        next_run = job.next_run_at
        if job.spec.schedule.type != "at":
            next_run = (await self.schedule_of(job.spec, job_id=job.id)).first_at_or_after(now)
        resumed = await self.store.job_set_paused(JobSetPausedParams(
            id=job.id, paused=False, next_run_at=next_run, now=now, actor=self._who(actor)))
        self._changed()
        return resumed

    async def trigger_job(self, ref: str, *, actor: str | None = None,
                          details: Mapping[str, Any] | None = None) -> Occurrence:
        """Run the job now, once, outside its schedule (with an idempotency key of its own).
        ``details`` go on the trigger's audit entry, written in the same transaction."""
        job = await self._job(ref)
        now = self.clock.now()
        check_run_quota(await namespace_info(self.admin, job.namespace, now), 1, now)
        stored = await self.store.occurrence_insert(OccurrenceInsertParams(occurrences=[
            NewOccurrence(job_id=job.id, scheduled_at=now, due_at=now, queue=job.spec.queue,
                          priority=job.spec.priority, max_attempts=job.spec.retry.max_attempts,
                          trigger=Trigger.MANUAL)], now=now,
            audit=AuditAction.TRIGGER, actor=self._who(actor),
            details=dict(details) if details is not None else None))
        if self.after_insert is not None:
            await self.after_insert(stored)
        self._changed()
        return stored[0]

    async def delete_job(self, ref: str, *, actor: str | None = None,
                         version: int | None = None) -> None:
        job = await self._job(ref)
        await self.store.job_delete(JobDeleteParams(
            id=job.id, now=self.clock.now(), actor=self._who(actor),
            version=versioned(job.spec.name, version, job.namespace)))

    async def preview(self, job: JobInput | str, n: int = 5,
                      after: datetime | None = None) -> list[datetime]:
        if isinstance(job, str):
            found = await self._job(job)
            schedule = await self.schedule_of(found.spec, job_id=found.id)
        else:
            schedule = await self.schedule_of(to_spec(job))
        return preview(schedule, after or self.clock.now(), n)

    async def backfill(self, ref: str, since: datetime, until: datetime, *,
                       limit: int = MAX_BATCH, overlap: Overlap | str | None = None,
                       dry_run: bool = False, actor: str | None = None) -> Backfill:
        """Occurrences for each fire time in ``[since, until)``, due now, with trigger
        ``backfill``. Idempotent: a fire time that already has an occurrence keeps it.

        ``overlap`` is the policy the new runs are claimed under instead of the job's (stored
        on each run); None leaves them to the job's own. With ``dry_run`` nothing is stored:
        the result says which runs a backfill would create and which exist already."""
        job = await self._job(ref)
        now = self.clock.now()
        chosen = overlap_choice(overlap)
        if since >= until:
            raise ValidationError("until", "must be after 'from'")
        if until > now:
            raise ValidationError("until", "must not be in the future; a backfill fills the past")
        bound = min(limit, MAX_BATCH)
        schedule = await self.schedule_of(job.spec, job_id=job.id)
        times: list[datetime] = []
        t = schedule.first_at_or_after(since)
        while t is not None and t < until:
            if len(times) == bound:
                raise ValidationError("until", f"the range has more than {bound} fire times; "
                                      "backfill it in smaller ranges")
            times.append(t)
            t = schedule.next_after(t)
        result = Backfill(job_id=job.id, since=since, until=until, fire_times=times,
                          existing=[], overlap=chosen or job.spec.overlap,
                          overlap_chosen=chosen is not None, dry_run=dry_run)
        if not times:
            return result
        before = await self.store.occurrence_list(OccurrenceListParams(
            job_id=job.id, since=times[0], until=times[-1] + timedelta(microseconds=1),
            limit=MAX_BATCH))
        have = {o.scheduled_at for o in before}
        result = replace(result, existing=[t for t in times if t in have])
        if dry_run:
            return result
        check_run_quota(await namespace_info(self.admin, job.namespace, now),
                   len(times) - len(result.existing), now)
        stored = await self.store.occurrence_insert(OccurrenceInsertParams(occurrences=[
            NewOccurrence(job_id=job.id, scheduled_at=t, due_at=now, queue=job.spec.queue,
                          priority=job.spec.priority, max_attempts=job.spec.retry.max_attempts,
                          trigger=Trigger.BACKFILL, overlap=chosen) for t in times], now=now,
            audit=AuditAction.BACKFILL, actor=self._who(actor),
            details={"from": since.isoformat(), "to": until.isoformat(), "runs": len(times),
                     "overlap": chosen.value if chosen is not None else None}))
        if self.after_insert is not None:
            await self.after_insert(stored)
        self._changed()
        return replace(result, occurrences=stored)

    async def job_status(self, ref: str, last_n: int = 100) -> tuple[Job, JobStatus]:
        """The job and how it has been doing over its last ``last_n`` finished runs."""
        job = await self._job(ref)
        status = await self.admin.job_status_get(
            JobStatusParams(job_id=job.id, now=self.clock.now(), last_n=last_n))
        return job, status


# The synchronous facade, defined over AsyncClient (imported last: it imports this module).
from tickwork.client.sync import Client as Client  # noqa: E402


def _planned_with(spec: JobSpec) -> tuple[str, int, int]:
    """What a planned run copies from its job besides its times."""
    return spec.queue, spec.priority, spec.retry.max_attempts
