"""One log line per finished attempt: job, scheduled time, attempt, result, duration, lateness."""

from __future__ import annotations

import logging
from datetime import datetime

from tickwork.models import Claim
from tickwork.outcomes import Result

runs_log = logging.getLogger("tickwork.runs")


def log_run(claim: Claim, result: Result, started: datetime, finished: datetime) -> None:
    occ = claim.occurrence
    late_ms = (started - occ.scheduled_at).total_seconds() * 1000
    took_ms = (finished - started).total_seconds() * 1000
    runs_log.info("%s @ %s attempt %d: %s in %.0fms (started %.0fms after its time)",
                  claim.job.spec.name, occ.scheduled_at.strftime("%H:%M:%S"), occ.attempt,
                  type(result).__name__.lower(), took_ms, late_ms)
