"""``Client``: a synchronous facade over ``AsyncClient``.

It runs the async core on a private event loop in a background thread, so it works from any
code, including code that already runs an event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from tickwork.client.calendars import CalendarChange
from tickwork.clock import Clock
from tickwork.drivers.alerts import StoredAlert
from tickwork.drivers.base import MAX_BATCH
from tickwork.drivers.calendars import StoredCalendar
from tickwork.drivers.enqueue import Enqueued
from tickwork.drivers.namespaces import NamespaceInfo
from tickwork.models import (
    Attempt,
    AuditEntry,
    Backfill,
    Job,
    Occurrence,
    Overlap,
)
from tickwork.schedules.structured import Fire

if TYPE_CHECKING:
    from tickwork.client import AsyncClient
    from tickwork.client.specs import JobInput

T = TypeVar("T")


class Client:
    """Synchronous facade: ``with Client.open("sqlite:///tickwork.db") as c: c.create_job(...)``."""

    def __init__(self, inner: AsyncClient, loop: asyncio.AbstractEventLoop,
                 thread: threading.Thread) -> None:
        self._inner = inner
        self._loop = loop
        self._thread = thread

    @classmethod
    def open(cls, database: str = "sqlite:///tickwork.db", *, clock: Clock | None = None,
             migrate: bool = True, namespace: str | None = None) -> Client:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="tickwork-client", daemon=True)
        thread.start()
        from tickwork.client import AsyncClient  # noqa: PLC0415  (it imports this module)

        try:
            inner = asyncio.run_coroutine_threadsafe(
                AsyncClient.open(database, clock=clock, migrate=migrate, namespace=namespace),
                loop).result()
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

    def list_namespaces(self) -> list[NamespaceInfo]:
        return self._run(self._inner.list_namespaces())

    def set_quotas(self, name: str, changes: Mapping[str, object]) -> NamespaceInfo:
        return self._run(self._inner.set_quotas(name, changes))

    def create_job(self, job: JobInput, *, actor: str | None = None) -> Job:
        return self._run(self._inner.create_job(job, actor=actor))

    def create_jobs(self, jobs: Iterable[JobInput], *, actor: str | None = None) -> list[Job]:
        return self._run(self._inner.create_jobs(list(jobs), actor=actor))

    def enqueue(self, kind: str, payload: Mapping[str, Any], *, at: datetime | None = None,
                queue: str | None = None, retry: Mapping[str, Any] | None = None,
                dedupe_key: str | None = None,
                dedupe_window: float | str | timedelta | None = None,
                actor: str | None = None, **fields: Any) -> Enqueued:
        return self._run(self._inner.enqueue(
            kind, payload, at=at, queue=queue, retry=retry, dedupe_key=dedupe_key,
            dedupe_window=dedupe_window, actor=actor, **fields))

    def enqueue_many(self, requests: Iterable[Mapping[str, Any]], *,
                     actor: str | None = None) -> list[Enqueued]:
        return self._run(self._inner.enqueue_many(list(requests), actor=actor))

    def get_job(self, ref: str) -> Job:
        return self._run(self._inner.get_job(ref))

    def list_jobs(self, **filters: Any) -> list[Job]:
        return self._run(self._inner.list_jobs(**filters))

    def update_job(self, ref: str, changes: Mapping[str, Any], *,
                   actor: str | None = None) -> Job:
        return self._run(self._inner.update_job(ref, changes, actor=actor))

    def pause_job(self, ref: str, *, actor: str | None = None) -> Job:
        return self._run(self._inner.pause_job(ref, actor=actor))

    def resume_job(self, ref: str, *, actor: str | None = None) -> Job:
        return self._run(self._inner.resume_job(ref, actor=actor))

    def trigger_job(self, ref: str, *, actor: str | None = None) -> Occurrence:
        return self._run(self._inner.trigger_job(ref, actor=actor))

    def delete_job(self, ref: str, *, actor: str | None = None) -> None:
        self._run(self._inner.delete_job(ref, actor=actor))

    def backfill(self, ref: str, since: datetime, until: datetime, *, limit: int = MAX_BATCH,
                 overlap: Overlap | str | None = None, dry_run: bool = False,
                 actor: str | None = None) -> Backfill:
        return self._run(self._inner.backfill(ref, since, until, limit=limit, overlap=overlap,
                                              dry_run=dry_run, actor=actor))

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

    def cancel_run(self, job: str, scheduled_at: datetime, *,
                   actor: str | None = None) -> Occurrence:
        return self._run(self._inner.cancel_run(job, scheduled_at, actor=actor))

    def retry_run(self, job: str, scheduled_at: datetime, *,
                  actor: str | None = None) -> Occurrence:
        return self._run(self._inner.retry_run(job, scheduled_at, actor=actor))

    def audit(self, **filters: Any) -> list[AuditEntry]:
        return self._run(self._inner.audit(**filters))



