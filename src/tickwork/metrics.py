"""Prometheus metrics, written by hand in the text exposition format (no extra dependency).

One ``Metrics`` object per process counts what happens in it: attempts finished, their
durations and start lateness (from the worker pool's ``on_finished`` hook), claims, the
dispatch mode and its switches, occurrences planned and promoted, rescued leases and repairs.
Every count is a plain integer increment on the event loop's thread; the text is built only
when scraped.

``render`` is what the API serves (``tickwork api``, ``tickwork run``): the store-wide figures
(occurrences by state, queue depth), read when ``/metrics`` is scraped and passed in, then the
process's own. ``render_process`` is what a ``tickwork worker`` or ``tickwork scheduler`` serves
on its ``metrics_address``: its own figures only, with gauges it reads at scrape time.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tickwork.drivers.admin import QueueInfo
from tickwork.drivers.base import Completion
from tickwork.models import Claim

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    300.0)
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    300.0, 1800.0)
# Where claims come from: Redis deliveries, the store while Redis is unreachable, or the store
# alone (no Redis configured: the store's name, "postgres" or "sqlite").
REDIS, DEGRADED = "redis", "degraded"
WORKER, SCHEDULER = "worker", "scheduler"
_OUTCOMES: dict[type, str] = {}  # result type -> its label ("success", "fail", ...)


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family a process reads at scrape time: ``samples`` are (labels, value),
    labels already in exposition form (``queue="default"``) or empty."""

    name: str
    kind: str  # counter | gauge
    help: str
    samples: Sequence[tuple[str, float]]

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        out += [f"{self.name}{{{labels}}} {_num(value)}" if labels
                else f"{self.name} {_num(value)}" for labels, value in self.samples]
        return out


class DispatchMode:
    """The dispatch mode of a process that claims: ``redis``, ``degraded`` or the store's
    name; ``changed`` is RedisClaimSource's ``on_mode`` hook."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.choices = (REDIS, DEGRADED) if mode in (REDIS, DEGRADED) else (mode,)
        self.degraded_total = 0  # switches into degraded mode

    @property
    def degraded(self) -> bool:
        return self.mode == DEGRADED

    def changed(self, mode: str) -> None:
        if mode == DEGRADED and self.mode != DEGRADED:
            self.degraded_total += 1
        self.mode = mode

    def families(self) -> list[Family]:
        gauge = mode_family(self.mode, self.choices)
        if len(self.choices) == 1:
            return [gauge]
        return [gauge, Family("tickwork_dispatch_degraded_total", "counter",
                              "Switches to degraded mode (Redis unreachable).",
                              [("", self.degraded_total)])]


def mode_family(mode: str, choices: Sequence[str]) -> Family:
    """``tickwork_dispatch_mode{mode="..."}``: 1 for ``mode``, 0 for the other choices."""
    return Family("tickwork_dispatch_mode", "gauge",
                  "1 for the dispatch mode now: redis, degraded (Redis unreachable, claiming "
                  "from the store) or the store alone (postgres, sqlite).",
                  [(f'mode="{_label(m)}"', int(m == mode)) for m in choices])


class Histogram:
    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        value = max(0.0, value)
        self.counts[bisect_left(self.buckets, value)] += 1  # past the last bound: +Inf
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
        self.attempts: dict[tuple[str, str], int] = {}  # by (queue, result)
        self.claims: dict[str, int] = {}  # claimed occurrences, by queue
        self.batches: dict[str, int] = {}  # claim calls that claimed any, by queue
        self.planned = 0
        self.promoted: dict[str, int] = {}  # by queue
        self.rescues = 0
        self.repairs = 0
        self.dispatch: DispatchMode | None = None  # set by a process that claims

    def attempt_finished(self, claim: Claim, result: object, completion: Completion) -> None:
        """The worker pool's on_finished: one attempt ran, with ``result``."""
        occ = claim.occurrence
        started, finished = completion.started_at, completion.finished_at
        outcome = _OUTCOMES.get(type(result)) or _OUTCOMES.setdefault(
            type(result), type(result).__name__.lower())
        key, by_queue = (claim.job.spec.kind, outcome), (occ.queue, outcome)
        with self._lock:
            if occ.attempt == 1:
                late = self.lateness.get(occ.queue)
                if late is None:
                    late = self.lateness[occ.queue] = Histogram(LATENESS_BUCKETS)
                late.observe((started - occ.scheduled_at).total_seconds())
            took = self.duration.get(key)
            if took is None:
                took = self.duration[key] = Histogram(DURATION_BUCKETS)
            took.observe((finished - started).total_seconds())
            self.attempts[by_queue] = self.attempts.get(by_queue, 0) + 1

    def claimed(self, queue: str, count: int) -> None:
        """One claim call of a queue's fetcher that claimed ``count`` (> 0) occurrences."""
        with self._lock:
            self.claims[queue] = self.claims.get(queue, 0) + count
            self.batches[queue] = self.batches.get(queue, 0) + 1

    def planned_inserted(self, count: int) -> None:
        with self._lock:
            self.planned += count

    def promoted_moved(self, queue: str, count: int) -> None:
        """The promoter's ``on_promoted``: ``count`` keys moved from the due set to streams."""
        with self._lock:
            self.promoted[queue] = self.promoted.get(queue, 0) + count

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
            lines += self._worker_lines()
            lines += self._scheduler_lines()
        return "\n".join(lines) + "\n"

    def render_process(self, role: str, extra: Iterable[Family] = ()) -> str:
        """What a worker or scheduler process serves: its own figures and ``extra`` (gauges
        and counters it reads at scrape time), none of the store-wide ones."""
        with self._lock:
            lines = self._worker_lines() if role == WORKER else self._scheduler_lines()
        for fam in extra:
            lines += fam.lines()
        return "\n".join(lines) + "\n"

    def _worker_lines(self) -> list[str]:
        lines = ["# HELP tickwork_start_lateness_seconds How long after its scheduled time a "
                 "first attempt started, by queue.",
                 "# TYPE tickwork_start_lateness_seconds histogram"]
        for queue, hist in sorted(self.lateness.items()):
            lines += hist.lines("tickwork_start_lateness_seconds", f'queue="{_label(queue)}"')
        lines += ["# HELP tickwork_attempt_duration_seconds How long attempts ran, by kind and "
                  "result.", "# TYPE tickwork_attempt_duration_seconds histogram"]
        for (kind, result), hist in sorted(self.duration.items()):
            lines += hist.lines("tickwork_attempt_duration_seconds",
                                f'kind="{_label(kind)}",result="{_label(result)}"')
        families = [
            Family("tickwork_attempts_total", "counter",
                   "Attempts this process finished, by queue and result.",
                   [(f'queue="{_label(q)}",result="{_label(r)}"', n)
                    for (q, r), n in sorted(self.attempts.items())]),
            Family("tickwork_claims_total", "counter",
                   "Occurrences this process claimed, by queue.",
                   [(f'queue="{_label(q)}"', n) for q, n in sorted(self.claims.items())]),
            Family("tickwork_claim_batches_total", "counter",
                   "Claim calls that claimed at least one occurrence, by queue.",
                   [(f'queue="{_label(q)}"', n) for q, n in sorted(self.batches.items())]),
            *(self.dispatch.families() if self.dispatch is not None else ()),
        ]
        return lines + [line for fam in families for line in fam.lines()]

    def _scheduler_lines(self) -> list[str]:
        families = [
            Family("tickwork_occurrences_planned_total", "counter",
                   "Occurrences this process's planner inserted into the store.",
                   [("", self.planned)]),
            Family("tickwork_promoted_total", "counter",
                   "Keys this process's promoter moved from the due set to a stream, by queue.",
                   [(f'queue="{_label(q)}"', n) for q, n in sorted(self.promoted.items())]),
            Family("tickwork_lease_expiries_total", "counter",
                   "Running attempts whose lease expired and were rescued.", [("", self.rescues)]),
            Family("tickwork_repairs_total", "counter",
                   "Dispatch state rebuilt from the store (the reconciler's repairs).",
                   [("", self.repairs)]),
        ]
        return [line for fam in families for line in fam.lines()]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    return repr(float(value)) if not float(value).is_integer() else str(int(value))
