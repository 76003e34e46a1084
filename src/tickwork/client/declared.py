"""Jobs declared in code (``@tickwork.job``) brought into a store: each one that does not exist
is created, each whose declaration changed is updated, the others are left alone. By name:
renaming a declaration creates a new job and leaves the old one (delete it yourself)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tickwork.document import parse_job_document
from tickwork.models import Job, JobSpec


class JobWriter(Protocol):
    """What syncing needs: ``AsyncClient`` on a database, or the CLI's REST API client."""

    async def get_job(self, ref: str) -> Job: ...
    async def create_jobs(self, jobs: Sequence[JobSpec]) -> list[Job]: ...
    async def update_job(self, ref: str, changes: Mapping[str, Any]) -> Job: ...


@dataclass(frozen=True, slots=True)
class Synced:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


async def sync_declared(client: JobWriter, docs: Sequence[Mapping[str, Any]], *,
                        dry_run: bool = False) -> Synced:
    """Create or update the declared jobs ``docs``; with ``dry_run``, only say what would."""
    result = Synced()
    for doc in docs:
        spec = parse_job_document(doc).spec
        try:
            current = await client.get_job(spec.name)
        except LookupError:  # JobNotFound, or the REST API's 404
            if not dry_run:
                await client.create_jobs([spec])
            result.created.append(spec.name)
            continue
        if current.spec == spec:
            result.unchanged.append(spec.name)
            continue
        if not dry_run:
            await client.update_job(current.id, doc)
        result.updated.append(spec.name)
    return result
