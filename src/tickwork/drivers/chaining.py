"""Trigger chains: what the end of a run triggers, decided in one place for every driver.

A job names other jobs in ``on_success``, ``on_failure`` and ``on_dead``. When a completion
(or a rescue) moves a run to a state that is one of those events, the driver inserts one
occurrence of each named job (trigger ``chain``, due now) in the same transaction as the
completion: the fence on the attempt makes the completion apply once, so the chain fires
once, and a worker that dies after the commit cannot lose it.

The chained occurrence's ``scheduled_at`` is the upstream run's, so it reads as the run "for"
the same time; when that instant is taken by another run of the target (its own schedule,
another upstream), the next free microsecond is used. A slot already holding a run with the
same upstream (job, scheduled time, attempt, event) means the chain fired already: nothing
more is inserted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from tickwork.models import (
    UPSTREAM_OUTPUT_MAX,
    JobSpec,
    OccurrenceState,
    Upstream,
)

ONE_US = timedelta(microseconds=1)
MAX_PROBES = 1000  # free instants looked for past the upstream's scheduled_at


@dataclass(frozen=True, slots=True)
class ChainFire:
    """Occurrences to create, one per job named in ``targets``, for ``upstream``."""

    targets: tuple[str, ...]
    upstream: Upstream


def chain_fire(spec: JobSpec, *, job_id: str, scheduled_at: datetime, attempt: int,
               idempotency_key: str, state: OccurrenceState,
               output: str | None = None) -> ChainFire | None:
    """What a run of the job ``spec`` moving to ``state`` triggers, or None."""
    found = spec.chain_targets(state)
    if found is None:
        return None
    event, targets = found
    if output is not None and len(output.encode("utf-8", "replace")) > UPSTREAM_OUTPUT_MAX:
        output = None
    return ChainFire(targets, Upstream(
        job_id=job_id, job_name=spec.name, scheduled_at=scheduled_at, attempt=attempt,
        event=event, idempotency_key=idempotency_key, output=output))


def same_run(a: Upstream | None, b: Upstream) -> bool:
    """Whether ``a`` is the upstream ``b`` names: the same end of the same run."""
    return a is not None and (a.job_id, a.scheduled_at, a.attempt, a.event) == (
        b.job_id, b.scheduled_at, b.attempt, b.event)
