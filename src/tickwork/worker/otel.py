"""Traces of attempts through OpenTelemetry (the ``otel`` extra).

Imported only when traces are on (``otel`` setting, ``TICKWORK_OTEL=1``, or the standard
``OTEL_*`` variables naming an exporter or endpoint: tickwork.runtime.tracing decides), so
without the extra nothing here loads. Each attempt gets a span ``tickwork.attempt <job
name>`` with the job's id, name and kind, the queue, the attempt number, the idempotency key,
the scheduled time and, when it ends, the outcome and the occurrence's next state. The span is
current while the attempt runs, so spans a Python job starts are its children, and its W3C
trace context (``traceparent``) goes to http jobs' targets as headers and with publish jobs'
messages.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context, propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from tickwork.drivers.base import Completion
from tickwork.models import AttemptOutcome, Claim, rfc3339
from tickwork.outcomes import Result

INSTRUMENTATION = "tickwork"


class OtelSpan:
    __slots__ = ("_span", "_token", "headers")

    def __init__(self, span: Span) -> None:
        self._span = span
        ctx = trace.set_span_in_context(span)
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=ctx)
        self.headers: Mapping[str, str] = carrier
        self._token = context.attach(ctx)

    def end(self, result: Result | None, completion: Completion | None) -> None:
        span = self._span
        try:
            context.detach(self._token)
        finally:
            if completion is None:
                span.set_attribute("tickwork.outcome", "stopped")
            else:
                span.set_attribute("tickwork.outcome", completion.outcome.value)
                span.set_attribute("tickwork.state", completion.state.value)
                if completion.outcome is AttemptOutcome.SUCCEEDED:
                    span.set_status(Status(StatusCode.OK))
                else:
                    span.set_status(Status(StatusCode.ERROR, completion.error or None))
            span.end()


class OtelAttempts:
    """The worker pool's tracer: spans from ``tracer_provider`` (default: the global one)."""

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self.tracer = trace.get_tracer(INSTRUMENTATION, tracer_provider=tracer_provider)

    def start(self, claim: Claim) -> OtelSpan:
        job, occ = claim.job, claim.occurrence
        span = self.tracer.start_span(
            f"tickwork.attempt {job.spec.name}", kind=SpanKind.CONSUMER, attributes={
                "tickwork.job.id": job.id, "tickwork.job.name": job.spec.name,
                "tickwork.job.kind": job.spec.kind, "tickwork.queue": occ.queue,
                "tickwork.attempt": occ.attempt,
                "tickwork.idempotency_key": occ.idempotency_key,
                "tickwork.scheduled_at": rfc3339(occ.scheduled_at)})
        return OtelSpan(span)
