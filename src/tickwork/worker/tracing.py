"""What the worker pool asks of a tracer: a span per attempt, and the headers that carry it.

The pool holds an ``AttemptTracer`` only when traces are on (the ``otel`` extra and setting:
tickwork.worker.otel); otherwise it holds None, and an attempt costs one ``is None`` test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from tickwork.drivers.base import Completion
from tickwork.models import Claim
from tickwork.outcomes import Result


class AttemptSpan(Protocol):
    """One attempt's span, current while the attempt runs (in its task)."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The trace context to send on (``traceparent``), for http and publish jobs."""
        ...

    def end(self, result: Result | None, completion: Completion | None) -> None:
        """Record the outcome and end the span; ``result`` None: the attempt was stopped
        (its lease was lost or the worker shut down) and has no result."""
        ...


class AttemptTracer(Protocol):
    def start(self, claim: Claim) -> AttemptSpan: ...
