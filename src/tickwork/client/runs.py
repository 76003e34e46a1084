"""The client's runs: listing them (a deleted job's too), one run with its attempts, cancel and
retry; alerts and the audit trail, kept to the client's namespace. A mixin of
``AsyncClient``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from tickwork.client.quotas import check_run_quota, namespace_info
from tickwork.clock import Clock
from tickwork.drivers.alerts import MAX_ALERTS, AlertListParams, StoredAlert
from tickwork.drivers.base import (
    MAX_BATCH,
    AuditListParams,
    OccurrenceCancelOneParams,
    OccurrenceListParams,
    OccurrenceRetryParams,
    Store,
)
from tickwork.errors import JobNotFound, OccurrenceNotFound
from tickwork.models import Attempt, AuditEntry, Job, Occurrence, OccurrenceState

if TYPE_CHECKING:
    from tickwork.drivers.admin import AdminStore


class RunMethods:
    store: Store
    clock: Clock
    namespace: str | None
    on_cancel: Callable[[], None] | None
    after_insert: Callable[[Sequence[Occurrence]], Awaitable[object]] | None

    if TYPE_CHECKING:  # AsyncClient's
        @property
        def admin(self) -> AdminStore: ...

        async def _job(self, ref: str) -> Job: ...

        def _named_here(self, job: Job, ref: str) -> bool: ...

        def _who(self, actor: str | None) -> str | None: ...

        def _changed(self) -> None: ...

    # -- runs --------------------------------------------------------------------------------

    async def list_runs(self, *, job: str | None = None, queue: str | None = None,
                        states: Sequence[str] = (),
                        since: datetime | None = None, until: datetime | None = None,
                        before: tuple[datetime, str] | None = None, limit: int = 50,
                        newest_first: bool = True) -> list[Occurrence]:
        """Up to ``limit`` runs, read in pages of the store's batch bound; ``before`` is the
        (scheduled_at, job_id) of the row the listing continues after."""
        job_ids: list[str | None] = [None]
        if job:
            job_ids = [j.id for j in await self.jobs_by_ref(job)]
        found: list[Occurrence] = []
        for job_id in job_ids:  # one, unless a name was reused by jobs since deleted
            found.extend(await self._list_runs(job_id, OccurrenceListParams(
                queue=queue, states=[OccurrenceState(s) for s in states], since=since,
                until=until, before=before, limit=limit, newest_first=newest_first,
                namespace=self.namespace)))
        if len(job_ids) > 1:
            found.sort(key=lambda o: (o.scheduled_at, o.job_id), reverse=newest_first)
            del found[limit:]
        return found

    async def jobs_by_ref(self, ref: str) -> list[Job]:
        """The job with this id or name; if there is none, the deleted jobs that had it (most
        recently deleted first), whose history stays. JobNotFound if neither."""
        try:
            return [await self._job(ref)]
        except JobNotFound:
            deleted = [j for j in await self.store.job_get_deleted(ref, self.namespace)
                       if self._named_here(j, ref)]
            if not deleted:
                raise
            return deleted

    async def _list_runs(self, job_id: str | None,
                         p: OccurrenceListParams) -> list[Occurrence]:
        found: list[Occurrence] = []
        while len(found) < p.limit:
            want = min(p.limit - len(found), MAX_BATCH)
            last = (found[-1].scheduled_at, found[-1].job_id) if found else p.before
            page = await self.store.occurrence_list(replace(
                p, job_id=job_id, before=last, limit=want))
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
        found = await self.store.alert_list(AlertListParams(
            job_id=job_id, state=state, before=before, limit=min(limit, MAX_ALERTS)))
        if job_id is None and self.namespace is not None:
            mine = await self._own_job_ids({a.job_id for a in found})
            found = [a for a in found if a.job_id in mine]
        return found

    async def _own_job_ids(self, job_ids: Iterable[str | None]) -> set[str]:
        """Those of ``job_ids`` whose jobs (live or deleted) are in this client's namespace."""
        mine: set[str] = set()
        for job_id in job_ids:
            if job_id is None:
                continue
            try:
                await self.store.job_get(job_id, self.namespace)
            except JobNotFound:
                if not await self.store.job_get_deleted(job_id, self.namespace):
                    continue
            mine.add(job_id)
        return mine

    async def get_run(self, job: str, scheduled_at: datetime) -> tuple[Occurrence, list[Attempt]]:
        job_id = (await self._job(job)).id
        occurrence = await self.store.occurrence_get(job_id, scheduled_at)
        return occurrence, await self.store.attempt_list(job_id, scheduled_at)

    async def find_run(self, job: str, scheduled_at: datetime
                       ) -> tuple[Job, Occurrence, list[Attempt]]:
        """A run by its job's id or name (a deleted job's too), with its attempts."""
        jobs = await self.jobs_by_ref(job)
        for found in jobs:
            try:
                occurrence = await self.store.occurrence_get(found.id, scheduled_at)
            except OccurrenceNotFound:
                if found is jobs[-1]:
                    raise
                continue
            return found, occurrence, await self.store.attempt_list(found.id, scheduled_at)
        raise JobNotFound(job)  # jobs_by_ref returns at least one

    async def cancel_run(self, job: str, scheduled_at: datetime, *,
                         actor: str | None = None) -> Occurrence:
        """Cancel a waiting or running run: it ends ``cancelled``, naming who cancelled it.
        A running attempt is stopped by its worker at its next heartbeat (an HTTP request
        aborted, a shell job's process group killed, an async callable cancelled; a sync
        callable's thread cannot be stopped: it runs out and its result is discarded).
        Conflict if the run already ended."""
        job_id = (await self._job(job)).id
        cancelled = await self.store.occurrence_cancel_one(OccurrenceCancelOneParams(
            job_id=job_id, scheduled_at=scheduled_at, now=self.clock.now(),
            actor=self._who(actor)))
        if self.on_cancel is not None:
            self.on_cancel()
        return cancelled

    async def retry_run(self, job: str, scheduled_at: datetime, *,
                        actor: str | None = None) -> Occurrence:
        """Run a dead, crashed or cancelled run again now, as its next attempt, with the same
        idempotency key, whatever the job's overlap policy. Conflict for any other state."""
        found = await self._job(job)
        job_id = found.id
        now = self.clock.now()
        check_run_quota(await namespace_info(self.admin, found.namespace, now), 1, now)
        retried = await self.store.occurrence_retry(OccurrenceRetryParams(
            job_id=job_id, scheduled_at=scheduled_at, now=self.clock.now(),
            actor=self._who(actor)))
        if self.after_insert is not None:  # with Redis dispatch: armed again
            await self.after_insert([retried])
        self._changed()
        return retried

    # -- audit -------------------------------------------------------------------------------

    async def audit(self, *, job: str | None = None, since: datetime | None = None,
                    after_id: int | None = None, limit: int = 100) -> list[AuditEntry]:
        """Recorded changes, oldest first; of one job (a deleted one too) if ``job`` is set."""
        job_id = (await self.jobs_by_ref(job))[0].id if job else None
        found = await self.store.audit_list(AuditListParams(
            job_id=job_id, since=since, after_id=after_id, limit=limit))
        if job_id is None and self.namespace is not None:
            # A page may come back shorter than ``limit``; the cursor (after_id) still moves.
            mine = await self._own_job_ids({e.job_id for e in found})
            found = [e for e in found if e.job_id in mine]
        return found
