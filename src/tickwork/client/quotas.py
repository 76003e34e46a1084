"""Namespace quotas, checked by the client before it writes: every face (REST API, CLI,
Python client, dashboard) goes through it, and bulk creation counts the whole batch.

- ``max_jobs``: jobs defined at once in the namespace; a create that would pass it is refused
  whole (QuotaExceeded, 422 in the API).
- ``max_payload_bytes``: a job's payload as compact JSON in UTF-8 (422).
- ``max_runs_per_hour``: attempts started in the current UTC clock hour, and the runs a trigger,
  backfill or retry asks for on top of them (429, with ``Retry-After`` and when it resets):
  the caller learns at once. The store's claim enforces the same quota on every run,
  scheduled ones included: past it, runs wait for the hour to turn (drivers/limits.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime

from tickwork.drivers.admin import AdminStore
from tickwork.drivers.limits import hour_start, next_hour
from tickwork.drivers.namespaces import QUOTA_MAX, NamespaceInfo, NamespaceListParams, Quotas
from tickwork.errors import QuotaExceeded, ValidationError
from tickwork.models import JobSpec


def payload_bytes(spec: JobSpec) -> int:
    text = json.dumps(spec.payload, separators=(",", ":"), ensure_ascii=False, default=str)
    return len(text.encode("utf-8", "surrogatepass"))


async def namespace_info(admin: AdminStore, name: str, now: datetime) -> NamespaceInfo:
    """Its quotas, with the jobs and this hour's runs counted only where a quota needs them."""
    found = await admin.namespace_list(NamespaceListParams(hour_start=hour_start(now), name=name,
                                                           quotas_only=True))
    return found[0] if found else NamespaceInfo(name=name, quotas=Quotas(), jobs=0,
                                                runs_this_hour=0)


@dataclass(slots=True)
class CreateGuard:
    """Checks each job of a creation against the namespace's quotas, counting as it goes."""

    info: NamespaceInfo
    adding: int = 0

    def check(self, spec: JobSpec) -> None:
        q = self.info.quotas
        if q.max_payload_bytes is not None:
            size = payload_bytes(spec)
            if size > q.max_payload_bytes:
                raise QuotaExceeded(self.info.name, "max_payload_bytes", q.max_payload_bytes,
                                    size, f"refuses job {spec.name!r}: its payload is {size} "
                                    "bytes")
        self.adding += 1
        if q.max_jobs is not None and self.info.jobs + self.adding > q.max_jobs:
            raise QuotaExceeded(self.info.name, "max_jobs", q.max_jobs, self.info.jobs,
                                f"refuses more jobs: {self.info.jobs} defined, "
                                f"{self.adding} more asked for")

    def each(self, specs: Iterable[JobSpec]) -> Iterator[JobSpec]:
        for spec in specs:
            self.check(spec)
            yield spec


def check_run_quota(info: NamespaceInfo, adding: int, now: datetime) -> None:
    """Refuse ``adding`` more runs this hour when they would pass ``max_runs_per_hour``."""
    limit = info.quotas.max_runs_per_hour
    if limit is None or info.runs_this_hour + adding <= limit:
        return
    resets = next_hour(now)
    wait = max(1, int((resets - now).total_seconds() + 0.999))
    raise QuotaExceeded(info.name, "max_runs_per_hour", limit, info.runs_this_hour,
                        f"refuses {adding} more run(s): {info.runs_this_hour} started this "
                        f"hour; it resets at {resets.isoformat().replace('+00:00', 'Z')}",
                        resets_at=resets, retry_after=wait)


QUOTA_FIELDS = ("max_jobs", "max_runs_per_hour", "max_payload_bytes")


def merge_quotas(current: Quotas, changes: Mapping[str, object]) -> Quotas:
    """``current`` with ``changes`` applied: each a whole number from 0, or None (unlimited)."""
    values: dict[str, int | None] = {f: getattr(current, f) for f in QUOTA_FIELDS}
    for key, value in changes.items():
        if key not in QUOTA_FIELDS:
            raise ValidationError(key, "unknown quota; the quotas are " + ", ".join(QUOTA_FIELDS))
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value <= QUOTA_MAX):
            raise ValidationError(key, f"must be a whole number from 0 to {QUOTA_MAX}, or null "
                                  "for no limit")
        values[key] = value
    return Quotas(**values)
