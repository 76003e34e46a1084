"""Claims by key (occurrences a dispatch delivered): which keys can be claimed, pure.

A driver loads the rows of the delivered keys, describes each as a ``KeyRow``, and ``triage``
splits them into claimable, not due (re-arm at the due time) and gone (drop). The claimable ones
then go through ``claiming.plan_claims`` exactly as an ``occurrence_claim`` batch does, and
whatever the plan leaves waiting (an overlap policy holding it back) is not due either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from tickwork.drivers.claiming import ClaimPlan
from tickwork.models import OccurrenceState

Key = tuple[str, datetime]

WAITING = frozenset({OccurrenceState.SCHEDULED, OccurrenceState.QUEUED,
                     OccurrenceState.RETRYING})


@dataclass(frozen=True, slots=True)
class KeyRow:
    state: OccurrenceState
    due_at: datetime
    priority: int
    held: bool  # its job or its queue is paused: waits, re-armed later
    deleted: bool  # its job is deleted
    due: bool  # due_at <= now by every clock that decides (the caller's, the server's)


@dataclass(slots=True)
class Triage:
    claimable: list[Key]  # highest priority first, then earliest due: a claim's order
    not_due: list[tuple[str, datetime, datetime]]
    gone: list[Key]


def unique(keys: Iterable[Key]) -> list[Key]:
    return list(dict.fromkeys(keys))


def triage(keys: Sequence[Key], rows: Mapping[Key, KeyRow]) -> Triage:
    result = Triage([], [], [])
    for key in unique(keys):
        row = rows.get(key)
        if row is None or row.deleted or row.state not in WAITING:
            result.gone.append(key)
        elif row.held or not row.due:
            result.not_due.append((*key, row.due_at))
        else:
            result.claimable.append(key)
    result.claimable.sort(key=lambda k: (-rows[k].priority, rows[k].due_at))
    return result


def left_waiting(claimable: Sequence[Key], plan: ClaimPlan,
                 rows: Mapping[Key, KeyRow]) -> list[tuple[str, datetime, datetime]]:
    """Claimable keys the plan neither claimed nor marked: an overlap policy keeps them
    waiting (buffer_one, buffer_all behind a running one), so they are re-armed."""
    decided = {(c.job_id, c.scheduled_at) for part in (plan.claim, plan.missed, plan.skipped,
                                                       plan.superseded) for c in part}
    return [(*k, rows[k].due_at) for k in claimable if k not in decided]
