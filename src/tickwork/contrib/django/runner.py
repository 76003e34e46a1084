"""What ``manage.py tickwork_run`` and ``manage.py tickwork_worker`` start, from settings and
the ``jobs`` modules autodiscovered in the installed apps."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tickwork.client import AsyncClient
from tickwork.config import Settings
from tickwork.document import parse_job_document
from tickwork.drivers import SQLITE, backend_of
from tickwork.errors import Conflict, JobNotFound
from tickwork.runtime.embedded import EmbeddedService

log = logging.getLogger("tickwork.django")


async def run_service(settings: Settings, modules: Sequence[str]) -> None:
    """The embedded service: it creates or updates the declared jobs and allows their modules."""
    service = EmbeddedService(settings, imports=tuple(modules))
    await service.run_until_signalled()
    service.exit_now_if_threads_abandoned()


async def run_worker(settings: Settings, modules: Sequence[str],
                     jobs: Sequence[dict[str, Any]]) -> None:
    """A worker for the declared jobs. On SQLite, where one process does everything, it is
    the embedded service without the API; on PostgreSQL, ``tickwork worker``'s process, after
    creating or updating the declared jobs."""
    if backend_of(settings.database) == SQLITE:
        log.info("SQLite: one process plans and runs the jobs; starting the embedded service "
                 "without the API")
        await run_service(replace(settings, api_enabled=False), modules)
        return
    from tickwork.runtime.worker import WorkerProcess  # noqa: PLC0415  (the postgres extra)

    allowed = {*settings.executors.python_allowed_modules, *modules,
               *(str(doc["payload"]["callable"]).partition(":")[0] for doc in jobs)}
    settings = replace(settings, executors=replace(
        settings.executors, python_allowed_modules=tuple(sorted(allowed))))
    await sync_jobs(settings.database, jobs)
    worker = WorkerProcess(settings)
    await worker.run_until_signalled()
    worker.exit_now_if_threads_abandoned()


async def sync_jobs(database: str, docs: Sequence[dict[str, Any]]) -> None:
    """Create the declared jobs that do not exist; update those whose declaration changed.
    Several workers starting at once may race on a job: the one that loses finds it made."""
    async with await AsyncClient.open(database) as client:
        for doc in docs:
            spec = parse_job_document(doc).spec
            try:
                current = await client.get_job(spec.name)
            except JobNotFound:
                try:
                    await client.create_job(spec)
                except Conflict:
                    continue  # another worker created it a moment ago
                log.info("created job %s", spec.name)
                continue
            if current.spec != spec:
                await client.update_job(current.id, doc)
                log.info("updated job %s to match its declaration", spec.name)
