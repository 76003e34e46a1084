"""What every CLI command shares: settings, the client (database or API), reading JSON input."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from tickwork.cli.options import CLI_ONLY_ENV, Target
from tickwork.client.calendars import CalendarChange
from tickwork.config import Settings, load_settings
from tickwork.document import parse_instant
from tickwork.document.limits import Limits
from tickwork.document.text import check_text
from tickwork.drivers.admin import QueueInfo
from tickwork.drivers.alerts import StoredAlert
from tickwork.drivers.calendars import StoredCalendar
from tickwork.drivers.enqueue import Enqueued
from tickwork.drivers.limits import KeyLimitInfo, Owner
from tickwork.drivers.namespaces import NamespaceInfo
from tickwork.errors import ValidationError
from tickwork.models import Attempt, AuditEntry, Backfill, Job, JobSpec, Occurrence, Overlap
from tickwork.schedules.structured import Fire


def settings_from(target: Target, **flags: object) -> Settings:
    """The settings: ``flags`` (and the target's), then TICKWORK_* variables, then TOML."""
    flags = {"database": target.database, "redis": target.redis, **flags}
    env = {k: v for k, v in os.environ.items() if k not in CLI_ONLY_ENV}
    settings = load_settings(flags=flags, env=env, toml_path=target.config)
    settings.validate()
    return settings


class ManagementClient(Protocol):
    """What the job, run, queue, calendar, audit and alert commands use: ``AsyncClient`` on
    a database, or ``tickwork.cli.remote.RemoteClient`` over the REST API. Run control names
    no actor: the client records the OS user on a database, the API the token's name."""

    async def close(self) -> None: ...
    async def create_jobs(self, jobs: Sequence[JobSpec]) -> list[Job]: ...
    async def enqueue_many(self, requests: Sequence[Mapping[str, Any]]) -> list[Enqueued]: ...
    async def get_job(self, ref: str) -> Job: ...
    async def list_jobs(self, *, queue: str | None = None, tag: str | None = None,
                        kind: str | None = None, name_contains: str | None = None,
                        paused: bool | None = None, after_name: str | None = None,
                        limit: int = 100) -> list[Job]: ...
    async def update_job(self, ref: str, changes: Mapping[str, Any]) -> Job: ...
    async def pause_job(self, ref: str) -> Job: ...
    async def resume_job(self, ref: str) -> Job: ...
    async def trigger_job(self, ref: str) -> Occurrence: ...
    async def delete_job(self, ref: str) -> None: ...
    async def preview_fires(self, job: str, n: int = 5,
                            after: datetime | None = None) -> list[Fire]: ...
    async def backfill(self, ref: str, since: datetime, until: datetime, *,
                       limit: int = ..., overlap: Overlap | str | None = None,
                       dry_run: bool = False) -> Backfill: ...
    async def list_runs(self, *, job: str | None = None, states: Sequence[str] = (),
                        since: datetime | None = None, until: datetime | None = None,
                        limit: int = 50, newest_first: bool = True) -> list[Occurrence]: ...
    async def get_run(self, job: str,
                      scheduled_at: datetime) -> tuple[Occurrence, list[Attempt]]: ...
    async def cancel_run(self, job: str, scheduled_at: datetime) -> Occurrence: ...
    async def retry_run(self, job: str, scheduled_at: datetime) -> Occurrence: ...
    async def audit(self, *, job: str | None = None, since: datetime | None = None,
                    after_id: int | None = None, limit: int = 100) -> list[AuditEntry]: ...
    async def list_alerts(self, *, job: str | None = None, state: str | None = None,
                          limit: int = 50) -> list[StoredAlert]: ...
    async def list_queues(self) -> list[QueueInfo]: ...
    async def list_namespaces(self) -> list[NamespaceInfo]: ...
    async def set_quotas(self, name: str, changes: Mapping[str, object]) -> NamespaceInfo: ...
    async def pause_queue(self, name: str) -> QueueInfo: ...
    async def resume_queue(self, name: str) -> QueueInfo: ...
    async def set_queue_limits(self, name: str, limits: Limits, *,
                               namespace: Owner = ...) -> QueueInfo: ...
    async def list_limits(self) -> list[KeyLimitInfo]: ...
    async def set_limit(self, key: str, limits: Limits, *,
                        namespace: Owner = ...) -> KeyLimitInfo: ...
    async def delete_limit(self, key: str) -> None: ...
    async def list_calendars(self) -> list[StoredCalendar]: ...
    async def get_calendar(self, name: str) -> StoredCalendar: ...
    async def calendar_jobs(self, name: str, limit: int = ...) -> list[Job]: ...
    async def create_calendar(self, doc: Mapping[str, Any]) -> StoredCalendar: ...
    async def update_calendar(self, name: str, doc: Mapping[str, Any]) -> CalendarChange: ...
    async def delete_calendar(self, name: str) -> None: ...
    async def import_calendar(self, name: str, ics: str, *, description: str | None = None,
                              replace: bool = False, source: str = ...) -> CalendarChange: ...


def through_api(target: Target) -> bool:
    """Whether the command goes through the REST API: ``--api`` (or ``TICKWORK_API_URL``,
    unless a ``--database`` flag is given). Raises ValidationError for both flags at once."""
    if not target.remote or (target.api_from_env and target.database):
        return False
    if target.database:
        raise ValidationError("--api", "give --api or --database, not both")
    if target.redis:
        raise ValidationError("--redis", "is the server's business with --api: the API "
                              "process feeds Redis itself")
    return True


async def open_client(target: Target, *, create: bool = False) -> ManagementClient:
    """A client on the configured database, or on the REST API with ``--api``. Only a
    command that adds something (``create``) creates or upgrades the database; the others
    refuse one that is missing. On a database it sees ``--namespace``, or without it every
    namespace (and creates in ``default``)."""
    if through_api(target):
        from tickwork.cli.remote import RemoteClient  # noqa: PLC0415  (httpx loads only for --api)

        return RemoteClient(str(target.api), target.token, namespace=target.namespace)
    from tickwork.runtime.client import client_for  # noqa: PLC0415  (the store loads to use it)

    return await client_for(settings_from(target), create=create,
                            namespace=target.namespace)


def read_documents(source: str) -> list[Any]:
    """One JSON document, a JSON array of them, or one per line (NDJSON), from a file or '-'."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError("--json", f"cannot read {source}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ValidationError("--json", f"{'standard input' if source == '-' else source} "
                              f"is not UTF-8 text (byte {exc.start + 1})") from None
    docs = _parse_documents(text)
    for index, doc in enumerate(docs):  # "\ud800" escapes, or stdin's surrogateescape
        check_text(doc, f"[{index}]" if len(docs) > 1 else "")
    return docs


def _parse_documents(text: str) -> list[Any]:
    if not text.strip():
        raise ValidationError("--json", "the input is empty; expected a JSON job document")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise ValidationError("--json", f"not valid JSON: line {whole.lineno} column "
                                  f"{whole.colno}: {whole.msg}") from None
        docs = []
        for number, line in lines:  # NDJSON: one document per line
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValidationError("--json", f"not valid JSON on line {number} column "
                                      f"{exc.colno}: {exc.msg}") from None
        return docs
    return value if isinstance(value, list) else [value]


def instant_arg(value: str, name: str) -> datetime:
    return parse_instant(value, name)


def check_limit(limit: int) -> None:
    """--limit of a listing: any number of rows from 1 (the listing reads them in pages)."""
    if limit < 1:
        raise ValidationError("--limit", f"must be at least 1 (got {limit})")


def working_directory_on_path() -> str:
    """Put the working directory first on ``sys.path``, as uvicorn and celery do: a python
    job's module in the project folder imports as it does under ``python -m`` (the
    ``tickwork`` script's own folder is what Python puts there)."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    return here


def import_modules(modules: Sequence[str]) -> None:
    """Import the --import modules, finding them in the working directory first as uvicorn and
    celery do (the ``tickwork`` script's own folder is what Python puts on ``sys.path``).
    A module that cannot be imported is one line naming it, not a traceback."""
    here = working_directory_on_path()
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise ValidationError("--import", f"cannot import {name}: {exc} (looked in "
                                  f"{here} and the installed packages)") from None
        except Exception as exc:  # the user's module may raise anything
            raise ValidationError("--import", f"importing {name} failed: "
                                  f"{type(exc).__name__}: {exc}") from None
