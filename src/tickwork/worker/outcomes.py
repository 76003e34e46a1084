"""The one place where an attempt's result becomes the occurrence's next state.

Results are a small closed set: Success, Fail (retriable or fatal), Cancel, and TimedOut, which
the worker produces itself when the deadline passes.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from tickwork.drivers.base import Completion
from tickwork.frozen import direct
from tickwork.models import AttemptOutcome, Claim, Delivery, OccurrenceState
from tickwork.outcomes import Cancel, Result, Success, TimedOut
from tickwork.retry import backoff_delay

_new_completion = direct(Completion)  # one per run: without a class call's keyword dict


def decide(
    claim: Claim,
    result: Result,
    *,
    started_at: datetime,
    finished_at: datetime,
    rng: random.Random,
) -> Completion:
    """Map one attempt's result to the fenced completion the store applies."""
    occ, spec = claim.occurrence, claim.job.spec

    def complete(state: OccurrenceState, outcome: AttemptOutcome, *, output: str | None = None,
                 error: str | None = None, due_at: datetime | None = None) -> Completion:
        return _new_completion(
            job_id=occ.job_id, scheduled_at=occ.scheduled_at, attempt=occ.attempt, state=state,
            outcome=outcome, started_at=started_at, finished_at=finished_at, output=output,
            error=error, due_at=due_at, queued_at=occ.due_at,
        )

    if isinstance(result, Success):
        return complete(OccurrenceState.SUCCEEDED, AttemptOutcome.SUCCEEDED, output=result.output)
    if isinstance(result, Cancel):
        return complete(OccurrenceState.CANCELLED, AttemptOutcome.FAILED,
                        error=f"cancelled: {result.reason}")

    if isinstance(result, TimedOut):
        outcome, retriable = AttemptOutcome.TIMED_OUT, True
        error, output, retry_after = f"timed out after {result.seconds:g}s", None, None
    else:
        outcome, retriable = AttemptOutcome.FAILED, result.retriable
        error, output, retry_after = result.error, result.output, result.retry_after

    out_of_attempts = occ.attempt >= spec.retry.max_attempts
    if not retriable or out_of_attempts or spec.delivery is Delivery.AT_MOST_ONCE:
        if out_of_attempts and retriable:
            error = f"{error} (attempt {occ.attempt} of {spec.retry.max_attempts}, none left)"
        return complete(OccurrenceState.DEAD, outcome, output=output, error=error)

    delay = backoff_delay(spec.retry, occ.attempt, rng)
    if retry_after is not None:  # the target asked for a pause; honoured up to the backoff cap
        delay = max(delay, min(retry_after, spec.retry.backoff_max_seconds))
    return complete(OccurrenceState.RETRYING, outcome, output=output, error=error,
                    due_at=finished_at + timedelta(seconds=delay))
