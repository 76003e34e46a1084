"""What the worker says about finished attempts.

A failure is logged as it happens, with its error text: WARNING when the run will be retried,
ERROR when it is dead, INFO when it was cancelled. A success is a DEBUG line of its own, unless
``log_each_run`` is set (``tickwork run --demo`` sets it): at millions of runs a day a line per
success is noise, and formatting it was a tenth of a worker's CPU in a burst. Instead, once a
minute while attempts finish, one INFO line counts them by result.

Each attempt's line carries structured fields (``extra``): ``job``, ``job_id``,
``occurrence_key`` (the idempotency key), ``attempt``, ``queue``, ``kind``, ``state`` and
``outcome``; the JSON log format emits them as keys (tickwork.logs), the text one leaves them
out. They are built only when the line is logged.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from tickwork.drivers.base import Completion
from tickwork.models import Claim, OccurrenceState, rfc3339

runs_log = logging.getLogger("tickwork.runs")

SUMMARY_SECONDS = 60.0
_NAMES = {s: s.value for s in OccurrenceState}  # .value is a Python property: read once

_LEVELS = {
    OccurrenceState.SUCCEEDED: logging.DEBUG,
    OccurrenceState.RETRYING: logging.WARNING,
    OccurrenceState.DEAD: logging.ERROR,
    OccurrenceState.CANCELLED: logging.INFO,
}


class RunLog:
    """The worker pool's ``on_finished`` hook for logs: one line per failure, a summary a
    minute. ``each``: a line for every attempt, successes at INFO."""

    def __init__(self, *, each: bool = False, summary_seconds: float = SUMMARY_SECONDS) -> None:
        self.each = each
        self.summary_seconds = summary_seconds
        self.counts: Counter[str] = Counter()
        self._timer: asyncio.TimerHandle | None = None

    def finished(self, claim: Claim, completion: Completion) -> None:
        state = completion.state
        self.counts[_NAMES[state]] += 1
        if self._timer is None and self.summary_seconds > 0:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                self._timer = loop.call_later(self.summary_seconds, self.summarize)
        level = _LEVELS.get(state, logging.INFO)
        if level == logging.DEBUG and self.each:
            level = logging.INFO
        if runs_log.isEnabledFor(level):
            runs_log.log(level, "%s", describe(claim, completion),
                         extra=fields(claim, completion))

    def summarize(self) -> None:
        """Log the counts since the last summary (nothing when nothing finished), and reset."""
        self._timer = None
        if not self.counts:
            return
        total = sum(self.counts.values())
        parts = ", ".join(f"{n} {state}" for state, n in sorted(self.counts.items()))
        runs_log.info("%d attempts finished since the last summary: %s", total, parts)
        self.counts.clear()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.summarize()


def fields(claim: Claim, completion: Completion) -> dict[str, object]:
    """The structured fields of an attempt's log line."""
    occ = claim.occurrence
    return {"job": claim.job.spec.name, "job_id": occ.job_id,
            "occurrence_key": occ.idempotency_key, "attempt": occ.attempt, "queue": occ.queue,
            "kind": claim.job.spec.kind, "state": completion.state.value,
            "outcome": completion.outcome.value}


def describe(claim: Claim, completion: Completion) -> str:
    """One attempt in words: job, scheduled time, attempt, result, duration, lateness, and for a
    failure its error and what happens next."""
    occ = claim.occurrence
    took_ms = (completion.finished_at - completion.started_at).total_seconds() * 1000
    late_ms = (completion.started_at - occ.scheduled_at).total_seconds() * 1000
    head = (f"{claim.job.spec.name} @ {rfc3339(occ.scheduled_at)} attempt {occ.attempt}: "
            f"{completion.outcome.value} in {took_ms:.0f}ms (started {late_ms:.0f}ms after "
            f"its time)")
    if completion.state is OccurrenceState.SUCCEEDED:
        return head
    error = f": {completion.error}" if completion.error else ""
    if completion.state is OccurrenceState.RETRYING and completion.due_at is not None:
        return f"{head}{error}; retrying at {rfc3339(completion.due_at)}"
    if completion.state is OccurrenceState.DEAD:
        return f"{head}{error}; dead"
    return f"{head}{error}; {completion.state.value}"
