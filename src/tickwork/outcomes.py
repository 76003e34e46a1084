"""Job outcomes as values: what an attempt ended with, a small closed set.

An executor returns Success, Fail (retriable or fatal) or Cancel, and a Python job may raise
Fail or Cancel; the worker makes TimedOut itself when the deadline passes.
``worker/outcomes.py`` turns each into the occurrence's next state, in one place.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Success:
    output: str | None = None


@dataclass(frozen=True, slots=True)
class Fail(Exception):  # an outcome a job may raise, not an error of tickwork's
    """The attempt failed. Retriable failures are retried until max_attempts; fatal ones are not."""

    error: str
    retriable: bool = True
    retry_after: float | None = None
    output: str | None = None

    def __str__(self) -> str:
        return self.error


@dataclass(frozen=True, slots=True)
class Cancel(Exception):  # an outcome, like Fail
    """Stop this occurrence for good: it ends ``cancelled`` and is not retried."""

    reason: str

    def __str__(self) -> str:
        return self.reason


Outcome = Success | Fail | Cancel


@dataclass(frozen=True, slots=True)
class TimedOut:
    seconds: float


Result = Success | Fail | Cancel | TimedOut
