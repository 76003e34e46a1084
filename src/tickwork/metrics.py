"""Prometheus metrics: counted in plain Python, exposed through prometheus_client.

One ``Metrics`` object per process counts what happens in it: attempts finished, their
durations and start lateness (from the worker pool's ``on_finished`` hook), claims, the
dispatch mode and its switches, occurrences planned and promoted, rescued leases and repairs.
Every count is a plain integer increment on the event loop's thread: ``attempt_finished`` runs
once per executed attempt (10,000 a second in a burst), and prometheus_client's own metric
objects cost several times as much per observation (docs/observability.md has the figures).
The families are built only when scraped, by a custom collector, and prometheus_client writes
the exposition text, with its process collector's CPU, memory and file descriptor figures.

``render`` is what the API serves (``tickwork api``, ``tickwork run``): the store-wide figures
(occurrences by state, queue depth), read when ``/metrics`` is scraped and passed in, then the
process's own. ``render_process`` is what a ``tickwork worker`` or ``tickwork scheduler`` serves
on its ``metrics_address``: its own figures only, with gauges it reads at scrape time. Each
process serves its own page; prometheus_client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``)
does not apply and is not used.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest

from tickwork.drivers.admin import QueueInfo
from tickwork.drivers.base import Completion
from tickwork.drivers.limits import KeyLimitInfo
from tickwork.drivers.namespaces import NamespaceInfo
from tickwork.models import Claim

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # the format generate_latest writes
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    300.0)
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    300.0, 1800.0)
# Where claims come from: Redis deliveries, the store while Redis is unreachable, or the store
# alone (no Redis configured: the store's name, "postgres" or "sqlite").
REDIS, DEGRADED = "redis", "degraded"
WORKER, SCHEDULER, CONSUMER = "worker", "scheduler", "consume"
_OUTCOMES: dict[type, str] = {}  # result type -> its label ("success", "fail", ...)

Labels = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Family:
    """One counter or gauge family a process reads at scrape time: ``samples`` are
    (labels, value), labels a mapping (``{"queue": "default"}``) or empty."""

    name: str
    kind: str  # counter | gauge
    help: str
    samples: Sequence[tuple[Labels, float]]

    def metric(self) -> Metric:
        names = sorted({key for labels, _ in self.samples for key in labels})
        family: CounterMetricFamily | GaugeMetricFamily
        if self.kind == "counter":
            family = CounterMetricFamily(self.name, self.help, labels=names)
        else:
            family = GaugeMetricFamily(self.name, self.help, labels=names)
        for labels, value in self.samples:
            family.add_metric([labels.get(n, "") for n in names], value)
        return family


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
                              [({}, self.degraded_total)])]


def mode_family(mode: str, choices: Sequence[str]) -> Family:
    """``tickwork_dispatch_mode{mode="..."}``: 1 for ``mode``, 0 for the other choices."""
    return Family("tickwork_dispatch_mode", "gauge",
                  "1 for the dispatch mode now: redis, degraded (Redis unreachable, claiming "
                  "from the store) or the store alone (postgres, sqlite).",
                  [({"mode": m}, int(m == mode)) for m in choices])


class Histogram:
    """Counts per bucket, a sum and a count: what prometheus_client's Histogram keeps, without
    its per-observation cost (a label lookup and a lock per child)."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        value = value if value > 0.0 else 0.0  # not max(), which parses keywords: twice a run
        self.counts[bisect_left(self.buckets, value)] += 1  # past the last bound: +Inf
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, float]]:
        """(le, cumulative count) for each bound and +Inf, as the exposition writes them."""
        out, total = [], 0
        for bound, count in zip((*self.buckets, math.inf), self.counts, strict=True):
            total += count
            out.append(("+Inf" if bound == math.inf else repr(float(bound)), float(total)))
        return out


def histogram_family(name: str, text: str, labels: Sequence[str],
                     children: Iterable[tuple[Sequence[str], Histogram]]) -> Metric:
    family = HistogramMetricFamily(name, text, labels=labels)
    for values, hist in children:
        family.add_metric(list(values), hist.cumulative(), hist.sum)
    return family


class _Families:
    """A collector of families already built (prometheus_client's ``Collector`` protocol)."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterator[Metric]:
        yield from self.families


class Metrics:
    """Counters and histograms of one process; thread-safe (observed from the event loop,
    rendered from it too, but cheap to guard)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.lateness: dict[str, Histogram] = {}  # by queue
        self.held: dict[str, Histogram] = {}  # by queue: waits a limit imposed (limited_at)
        self.duration: dict[tuple[str, str], Histogram] = {}  # by (kind, result)
        self.attempts: dict[tuple[str, str], int] = {}  # by (queue, result)
        self.claims: dict[str, int] = {}  # claimed occurrences, by queue
        self.batches: dict[str, int] = {}  # claim calls that claimed any, by queue
        self.planned = 0
        self.promoted: dict[str, int] = {}  # by queue
        self.backlog: dict[str, int] = {}  # the promoter's bound now, by queue
        self.rescues = 0
        self.repairs = 0
        self.purged: dict[str, int] = {}  # job definitions the pruner purged, by reason
        self.dispatch: DispatchMode | None = None  # set by a process that claims
        self.commands: dict[tuple[str, str], int] = {}  # consumed, by (source, outcome)
        # The process's CPU, memory and file descriptors, and the Python version: read from
        # /proc at scrape time (prometheus_client's collectors, not registered globally).
        self.runtime = (ProcessCollector(registry=None), PlatformCollector(registry=None))

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
                if claim.limited_at is None:
                    late.observe((started - occ.scheduled_at).total_seconds())
                else:  # a limit held it: late until then, held by the limit after
                    late.observe(max(0.0, (claim.limited_at - occ.scheduled_at)
                                     .total_seconds()))
                    held = self.held.get(occ.queue)
                    if held is None:
                        held = self.held[occ.queue] = Histogram(LATENESS_BUCKETS)
                    held.observe(max(0.0, (started - claim.limited_at).total_seconds()))
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

    def promoter_backlog(self, queue: str, size: int) -> None:
        """The promoter's ``on_backlog``: a queue's backlog bound is now ``size`` entries."""
        with self._lock:
            self.backlog[queue] = size

    def rescued(self, count: int) -> None:
        with self._lock:
            self.rescues += count

    def repaired(self, count: int) -> None:
        with self._lock:
            self.repairs += count

    def command_handled(self, source: str, outcome: str) -> None:
        """A job command from ``source`` (broker/stream) was ``applied``, ``stale`` (an
        older version, not written) or ``dead`` (dead-lettered with its error)."""
        with self._lock:
            key = (source, outcome)
            self.commands[key] = self.commands.get(key, 0) + 1

    def jobs_purged(self, reason: str, count: int) -> None:
        """The pruner removed ``count`` definitions: ``finished`` one-off jobs or ``deleted``."""
        with self._lock:
            self.purged[reason] = self.purged.get(reason, 0) + count

    def render(self, *, states: Mapping[str, int], queues: Iterable[QueueInfo],
               all_states: Iterable[str] = (), limits: Iterable[KeyLimitInfo] = (),
               namespaces: Iterable[NamespaceInfo] = ()) -> str:
        """The exposition text: store-wide gauges (given) and this process's own figures."""
        queue_list = list(queues)
        key_list = list(limits)

        def by_queue(name: str, text: str, value: str) -> Family:
            return Family(name, "gauge", text,
                          [({"queue": q.name}, float(getattr(q, value))) for q in queue_list
                           if getattr(q, value) is not None])

        store = [
            Family("tickwork_occurrences", "gauge", "Occurrences in the store, by state.",
                   [({"state": state}, states.get(state, 0))
                    for state in sorted({*all_states, *states})]),
            by_queue("tickwork_queue_depth", "Occurrences due now and waiting, by queue.", "due"),
            by_queue("tickwork_queue_running", "Occurrences running, by queue.", "running"),
            by_queue("tickwork_queue_paused", "1 when the queue is paused.", "paused"),
            by_queue("tickwork_queue_max_running",
                     "The queue's cap on running attempts across every worker.", "max_running"),
            Family("tickwork_queue_rate_per_second", "gauge",
                   "The queue's rate limit across every worker, in starts per second.",
                   [({"queue": q.name}, q.rate.per_second) for q in queue_list if q.rate]),
            by_queue("tickwork_queue_burst", "The queue's rate limit burst.", "burst"),
            by_queue("tickwork_queue_rate_tokens",
                     "Starts the queue's rate limit allows right now.", "tokens"),
            Family("tickwork_limit_rate_per_second", "gauge",
                   "A named limit's rate, in starts per second, by key.",
                   [({"key": k.key}, k.rate.per_second) for k in key_list]),
            Family("tickwork_limit_burst", "gauge", "A named limit's burst, by key.",
                   [({"key": k.key}, float(k.burst)) for k in key_list]),
            Family("tickwork_limit_tokens", "gauge",
                   "Starts a named limit allows right now, by key.",
                   [({"key": k.key}, k.tokens) for k in key_list]),
            *namespace_families(list(namespaces)),
        ]
        with self._lock:
            own = [*self._worker_families(), *self._scheduler_families(),
                   *self._consume_families()]
        return self._text([f.metric() for f in store] + own)

    def render_process(self, role: str, extra: Iterable[Family] = ()) -> str:
        """What a worker or scheduler process serves: its own figures and ``extra`` (gauges
        and counters it reads at scrape time), none of the store-wide ones."""
        with self._lock:
            own = (self._worker_families() if role == WORKER else self._consume_families()
                   if role == CONSUMER else self._scheduler_families())
        return self._text(own + [f.metric() for f in extra])

    def _text(self, families: list[Metric]) -> str:
        registry = CollectorRegistry(auto_describe=False)
        for collector in (_Families(families), *self.runtime):
            registry.register(collector)
        return generate_latest(registry).decode("utf-8")

    def _worker_families(self) -> list[Metric]:
        families = [
            histogram_family("tickwork_start_lateness_seconds",
                             "How long after its scheduled time a first attempt started, by "
                             "queue.", ["queue"],
                             (((q,), h) for q, h in sorted(self.lateness.items()))),
            histogram_family("tickwork_held_by_limit_seconds",
                             "How long a limit held a first attempt back before it started "
                             "(not counted in start lateness), by queue.", ["queue"],
                             (((q,), h) for q, h in sorted(self.held.items()))),
            histogram_family("tickwork_attempt_duration_seconds",
                             "How long attempts ran, by kind and result.", ["kind", "result"],
                             (((k, r), h) for (k, r), h in sorted(self.duration.items()))),
        ]
        counts = [
            Family("tickwork_attempts_total", "counter",
                   "Attempts this process finished, by queue and result.",
                   [({"queue": q, "result": r}, n) for (q, r), n in sorted(self.attempts.items())]),
            Family("tickwork_claims_total", "counter",
                   "Occurrences this process claimed, by queue.",
                   [({"queue": q}, n) for q, n in sorted(self.claims.items())]),
            Family("tickwork_claim_batches_total", "counter",
                   "Claim calls that claimed at least one occurrence, by queue.",
                   [({"queue": q}, n) for q, n in sorted(self.batches.items())]),
            *(self.dispatch.families() if self.dispatch is not None else ()),
        ]
        return families + [f.metric() for f in counts]

    def _scheduler_families(self) -> list[Metric]:
        counts = [
            Family("tickwork_occurrences_planned_total", "counter",
                   "Occurrences this process's planner inserted into the store.",
                   [({}, self.planned)]),
            Family("tickwork_promoted_total", "counter",
                   "Keys this process's promoter moved from the due set to a stream, by queue.",
                   [({"queue": q}, n) for q, n in sorted(self.promoted.items())]),
            Family("tickwork_promoter_backlog", "gauge",
                   "The most entries this process's promoter lets a queue's streams hold "
                   "that no worker got yet: what its workers read in 80 ms, by queue.",
                   [({"queue": q}, n) for q, n in sorted(self.backlog.items())]),
            Family("tickwork_lease_expiries_total", "counter",
                   "Running attempts whose lease expired and were rescued.",
                   [({}, self.rescues)]),
            Family("tickwork_repairs_total", "counter",
                   "Dispatch state rebuilt from the store (the reconciler's repairs).",
                   [({}, self.repairs)]),
            Family("tickwork_jobs_purged_total", "counter",
                   "Job definitions the pruner removed past finished_job_retention_seconds, "
                   "by reason (finished one-off jobs, deleted jobs).",
                   [({"reason": r}, self.purged.get(r, 0)) for r in ("deleted", "finished")]),
        ]
        return [f.metric() for f in counts]

    def _consume_families(self) -> list[Metric]:
        dead = {k: n for k, n in self.commands.items() if k[1] == "dead"}
        counts = [
            Family("tickwork_commands_total", "counter",
                   "Job commands consumed from a stream, by source and outcome (applied, "
                   "stale, dead).",
                   [({"source": s, "outcome": o}, n) for (s, o), n in
                    sorted(self.commands.items())]),
            Family("tickwork_commands_dead_lettered_total", "counter",
                   "Job commands that could not be applied, sent to the dead letters with "
                   "their error, by source.",
                   [({"source": s}, n) for (s, _), n in sorted(dead.items())]),
        ]
        return [f.metric() for f in counts]


def namespace_families(spaces: list[NamespaceInfo]) -> list[Family]:
    """Each namespace's usage and quotas (a quota not set is left out: unlimited)."""
    return [
        Family("tickwork_namespace_jobs", "gauge", "Jobs defined, by namespace.",
               [({"namespace": n.name}, n.jobs) for n in spaces]),
        Family("tickwork_namespace_runs_this_hour", "gauge",
               "Attempts started since the top of the UTC hour, by namespace.",
               [({"namespace": n.name}, n.runs_this_hour) for n in spaces]),
        Family("tickwork_namespace_quota", "gauge", "Quotas, by namespace and quota.",
               [({"namespace": n.name, "quota": q}, getattr(n.quotas, q)) for n in spaces
                for q in ("max_jobs", "max_runs_per_hour", "max_payload_bytes")
                if getattr(n.quotas, q) is not None]),
    ]
