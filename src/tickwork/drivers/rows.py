"""Building models from rows, shared by the drivers; each supplies how it decodes an instant.

SQLite stores instants as integer microseconds, PostgreSQL as timestamptz; everything else
about a row is the same, so it is read in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from tickwork.drivers.codec import spec_from_json, upstream_from_json
from tickwork.frozen import direct
from tickwork.models import (
    Attempt,
    AttemptOutcome,
    Job,
    JobSpec,
    Occurrence,
    OccurrenceState,
    Overlap,
    Trigger,
    idempotency_key,
)

_new_occurrence = direct(Occurrence)  # one per run claimed: no class call's keyword dict
# Enum members by value: a dict lookup costs a fraction of calling the enum, and claims
# build several per occurrence.
STATES: dict[str, OccurrenceState] = {s.value: s for s in OccurrenceState}
TRIGGERS: dict[str, Trigger] = {t.value: t for t in Trigger}


class RowLike(Protocol):
    def __getitem__(self, key: str, /) -> Any: ...


class SpecCache:
    """Parsed job specs by (job id, version): claims read the same jobs over and over.

    Bounded in entries and in the length of the JSON they were parsed from (a proxy for their
    size in memory), so jobs with large payloads cannot make it grow past its budget either:
    when an entry would exceed a bound, the cache starts over.
    """

    def __init__(self, size: int = 10_000, max_chars: int = 16 * 1024 * 1024) -> None:
        self._size = size
        self._max_chars = max_chars
        self._chars = 0
        self._specs: dict[tuple[str, int], JobSpec] = {}

    def __len__(self) -> int:
        return len(self._specs)

    @property
    def chars(self) -> int:
        """The length of the JSON the cached specs were parsed from."""
        return self._chars

    def get(self, job_id: str, version: int, text: str) -> JobSpec:
        key = (job_id, version)
        spec = self._specs.get(key)
        if spec is None:
            if len(self._specs) >= self._size or self._chars + len(text) > self._max_chars:
                self._specs.clear()
                self._chars = 0
            spec = self._specs[key] = spec_from_json(text)
            self._chars += len(text)
        return spec


class RowReader:
    """Jobs, occurrences and attempts from rows whose instants ``instant`` decodes."""

    def __init__(self, instant: Callable[[Any], datetime]) -> None:
        self.instant = instant

    def maybe(self, value: Any) -> datetime | None:
        return None if value is None else self.instant(value)

    def job(self, row: RowLike, specs: SpecCache) -> Job:
        return Job(
            id=row["id"],
            spec=specs.get(row["id"], row["version"], row["spec"]),
            next_run_at=self.maybe(row["next_run_at"]),
            created_at=self.instant(row["created_at"]),
            updated_at=self.instant(row["updated_at"]),
            shard=row["shard"],
            created_by=row["created_by"],
            updated_by=row["updated_by"],
            namespace=row["namespace"],
        )

    def job_shown(self, row: RowLike, specs: SpecCache) -> Job:
        """``job``, as a reader is shown it: a one-off job's next run is its run planned and
        not started yet (``planned_run_at``), which the stored next_run_at no longer holds
        once the planner has planned it (up to planner_one_off_horizon_seconds ahead)."""
        job = self.job(row, specs)
        planned = row["planned_run_at"]
        if job.next_run_at is not None or planned is None:
            return job
        return replace(job, next_run_at=self.instant(planned))

    def occurrence(self, row: RowLike) -> Occurrence:
        return self._occurrence(
            row, state=STATES[row["state"]], attempt=row["attempt"],
            updated_at=self.instant(row["updated_at"]), lease_until=self.maybe(row["lease_until"]),
            worker=row["worker"])

    def claimed(self, row: RowLike, *, now: datetime, lease_until: datetime,
                worker: str) -> Occurrence:
        """The occurrence of a waiting ``row`` as a claim leaves it: running, its next attempt,
        leased to ``worker``. The claim returns only the keys it changed (the row was locked
        from the read to the claim, so nothing else moved it), not the whole row again."""
        return self._occurrence(row, state=OccurrenceState.RUNNING, attempt=row["attempt"] + 1,
                                updated_at=now, lease_until=lease_until, worker=worker)

    def _occurrence(self, row: RowLike, *, state: OccurrenceState, attempt: int,
                    updated_at: datetime, lease_until: datetime | None,
                    worker: str | None) -> Occurrence:
        scheduled_at = self.instant(row["scheduled_at"])
        trigger = TRIGGERS[row["trigger"]]
        return _new_occurrence(
            job_id=row["job_id"],
            scheduled_at=scheduled_at,
            due_at=self.instant(row["due_at"]),
            queue=row["queue"],
            priority=row["priority"],
            state=state,
            attempt=attempt,
            max_attempts=row["max_attempts"],
            trigger=trigger,
            idempotency_key=idempotency_key(row["job_id"], scheduled_at, trigger),
            created_at=self.instant(row["created_at"]),
            updated_at=updated_at,
            lease_until=lease_until,
            worker=worker,
            finished_at=self.maybe(row["finished_at"]),
            last_error=row["last_error"],
            upstream=upstream_from_json(row["upstream"]) if trigger is Trigger.CHAIN else None,
            overlap=Overlap(row["overlap"]) if row["overlap"] else None,
        )

    def attempt(self, row: RowLike) -> Attempt:
        return Attempt(
            job_id=row["job_id"],
            scheduled_at=self.instant(row["scheduled_at"]),
            number=row["number"],
            worker=row["worker"],
            queued_at=self.instant(row["queued_at"]),
            claimed_at=self.instant(row["claimed_at"]),
            started_at=self.maybe(row["started_at"]),
            finished_at=self.maybe(row["finished_at"]),
            outcome=AttemptOutcome(row["outcome"]) if row["outcome"] else None,
            output=row["output"],
            error=row["error"],
        )
