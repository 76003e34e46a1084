"""Prometheus metrics, written by hand in the text exposition format (no extra dependency).

One ``Metrics`` object per process counts what happens in it: attempt durations and start
lateness (from the worker pool's ``on_finished`` hook), rescued leases and repairs. What the
store knows (occurrences by state, queue depth) is read when ``/metrics`` is scraped and passed
to ``render``, so every process that serves /metrics reports the same store-wide figures.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from tickwork.drivers.admin import QueueInfo
from tickwork.models import Claim

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    300.0)
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    300.0, 1800.0)


class Histogram:
    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        value = max(0.0, value)
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        out, cumulative = [], 0
        sep = "," if labels else ""
        for bound, count in zip((*self.buckets, math.inf), self.counts, strict=True):
            cumulative += count
            le = "+Inf" if bound == math.inf else _num(bound)
            out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {cumulative}')
        suffix = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{suffix} {_num(self.sum)}", f"{name}_count{suffix} {self.count}"]
        return out


class Metrics:
    """Counters and histograms of one process; thread-safe (observed from the event loop,
    rendered from it too, but cheap to guard)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.lateness: dict[str, Histogram] = {}  # by queue
        self.duration: dict[tuple[str, str], Histogram] = {}  # by (kind, result)
        self.rescues = 0
        self.repairs = 0

    def attempt_finished(self, claim: Claim, result: object, started: datetime,
                         finished: datetime) -> None:
        """The worker pool's on_finished: one attempt ran from ``started`` to ``finished``."""
        occ = claim.occurrence
        outcome = type(result).__name__.lower()
        with self._lock:
            if occ.attempt == 1:
                late = self.lateness.setdefault(occ.queue, Histogram(LATENESS_BUCKETS))
                late.observe((started - occ.scheduled_at).total_seconds())
            key = (claim.job.spec.kind, outcome)
            took = self.duration.setdefault(key, Histogram(DURATION_BUCKETS))
            took.observe((finished - started).total_seconds())

    def rescued(self, count: int) -> None:
        with self._lock:
            self.rescues += count

    def repaired(self, count: int) -> None:
        with self._lock:
            self.repairs += count

    def render(self, *, states: Mapping[str, int], queues: Iterable[QueueInfo],
               all_states: Iterable[str] = ()) -> str:
        """The exposition text: store-wide gauges (given) and this process's own figures."""
        lines: list[str] = []

        def family(name: str, kind: str, text: str) -> None:
            lines.extend((f"# HELP {name} {text}", f"# TYPE {name} {kind}"))

        family("tickwork_occurrences", "gauge", "Occurrences in the store, by state.")
        for state in sorted({*all_states, *states}):
            lines.append(f'tickwork_occurrences{{state="{_label(state)}"}} {states.get(state, 0)}')
        queue_list = list(queues)
        family("tickwork_queue_depth", "gauge", "Occurrences due now and waiting, by queue.")
        lines += [f'tickwork_queue_depth{{queue="{_label(q.name)}"}} {q.due}' for q in queue_list]
        family("tickwork_queue_running", "gauge", "Occurrences running, by queue.")
        lines += [f'tickwork_queue_running{{queue="{_label(q.name)}"}} {q.running}'
                  for q in queue_list]
        family("tickwork_queue_paused", "gauge", "1 when the queue is paused.")
        lines += [f'tickwork_queue_paused{{queue="{_label(q.name)}"}} {int(q.paused)}'
                  for q in queue_list]
        with self._lock:
            family("tickwork_start_lateness_seconds", "histogram",
                   "How long after its scheduled time a first attempt started, by queue.")
            for queue, hist in sorted(self.lateness.items()):
                lines += hist.lines("tickwork_start_lateness_seconds", f'queue="{_label(queue)}"')
            family("tickwork_attempt_duration_seconds", "histogram",
                   "How long attempts ran, by kind and result.")
            for (kind, result), hist in sorted(self.duration.items()):
                lines += hist.lines("tickwork_attempt_duration_seconds",
                                    f'kind="{_label(kind)}",result="{_label(result)}"')
            family("tickwork_lease_expiries_total", "counter",
                   "Running attempts whose lease expired and were rescued.")
            lines.append(f"tickwork_lease_expiries_total {self.rescues}")
            family("tickwork_repairs_total", "counter",
                   "Dispatch state rebuilt from the store (the reconciler's repairs).")
            lines.append(f"tickwork_repairs_total {self.repairs}")
        return "\n".join(lines) + "\n"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))
