"""Job documents into what the store creates: specs checked one by one (a problem named with
its index), each job's first run, the actor who asks, and the small checks the client's
methods share."""

from __future__ import annotations

import getpass
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from datetime import datetime
from typing import Any

from tickwork.client.calendars import (
    calendar_first_run,
)
from tickwork.client.chains import CHAIN_FIELDS
from tickwork.document import (
    BulkParser,
    check_runs,
    first_run,
)
from tickwork.document.text import not_unicode
from tickwork.drivers.base import (
    JobCreateParams,
    JobVersion,
)
from tickwork.drivers.codec import new_job_id
from tickwork.drivers.namespaces import DEFAULT_NAMESPACE
from tickwork.errors import ValidationError
from tickwork.models import (
    JobSpec,
    Overlap,
    ScheduleSpec,
)
from tickwork.schedules.calendars import Calendar

JobInput = Mapping[str, Any] | JobSpec


def overlap_choice(value: Overlap | str | None) -> Overlap | None:
    """A backfill's overlap choice: a policy, or None for the job's own."""
    if value is None or isinstance(value, Overlap):
        return value
    try:
        return Overlap(value)
    except ValueError:
        raise ValidationError("overlap", "must be one of "
                              + ", ".join(o.value for o in Overlap)
                              + f" (got {value!r}); leave it out for the job's own") from None


def has_chain(doc: JobInput) -> bool:
    if isinstance(doc, JobSpec):
        return bool(doc.chained)
    if type(doc) is dict:
        return not _CHAIN_FIELDS.isdisjoint(doc)
    return isinstance(doc, Mapping) and any(f in doc for f in CHAIN_FIELDS)


_CHAIN_FIELDS = frozenset(CHAIN_FIELDS)


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


def os_user() -> str | None:
    """Who runs this process, as the audit trail names a CLI or Python client user."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (some containers)
        return None


def create_params(specs: Iterable[JobSpec], now: datetime,
                  calendars: Mapping[str, Calendar] | None = None,
                  actor: str | None = None,
                  namespace: str = DEFAULT_NAMESPACE) -> Iterator[JobCreateParams]:
    """What the store creates for ``specs``: each job's first run is computed (and checked to
    come) once per distinct schedule object (parsing hands out one per distinct schedule
    document), with ``calendars`` for schedules that name some."""
    firsts: dict[int, tuple[ScheduleSpec, datetime | None]] = {}
    for index, spec in enumerate(specs):
        if spec.schedule.offset_auto:  # its first run depends on its id: chosen here
            job_id = new_job_id()
            first = first_run(spec, now, job_id)
            try:
                check_runs(spec, first, now)
            except ValidationError as exc:
                raise ValidationError(f"[{index}].{exc.field}", exc.reason) from exc
            yield JobCreateParams(spec=spec, next_run_at=first, now=now, id=job_id, actor=actor,
                                  namespace=namespace)
            continue
        known = firsts.get(id(spec.schedule))
        if known is None:  # the tuple keeps the schedule alive, so no other takes its id
            known = (spec.schedule, calendar_first_run(spec, now, calendars))
            try:
                check_runs(spec, known[1], now)
            except ValidationError as exc:
                raise ValidationError(f"[{index}].{exc.field}", exc.reason) from exc
            firsts[id(spec.schedule)] = known
        yield JobCreateParams(spec=spec, next_run_at=known[1], now=now, actor=actor,
                              namespace=namespace)


def versioned(name: str, version: int | None, namespace: str) -> JobVersion | None:
    return None if version is None else JobVersion(name, version, namespace)


def check_texts(**fields: str | None) -> None:
    """ValidationError naming the first of ``fields`` that is not valid Unicode text."""
    for name, value in fields.items():
        reason = None if value is None else not_unicode(value)
        if reason is not None:
            raise ValidationError(name, reason)
