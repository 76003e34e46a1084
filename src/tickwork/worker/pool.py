"""The worker pool: claims due occurrences per queue, runs them, and reports the results.

Per queue, a fetcher claims as many occurrences as the queue has free slots (claim before
execute: state, attempt + 1 and a lease are written first), runs each in a task with the job's
timeout, and hands the result to the completer, which writes it fenced on the attempt. A
heartbeat extends the leases of running attempts and stops those the store says are no longer
theirs. ``stop()`` is the graceful shutdown of G10.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from tickwork.clock import Clock, delta, wait_event
from tickwork.drivers.base import (
    AttemptNoteParams,
    Completion,
    LeaseRef,
    NewOccurrence,
    OccurrenceHeartbeatParams,
    OccurrenceReleaseParams,
    Store,
)
from tickwork.drivers.chaining import chain_fire
from tickwork.errors import reported_outage
from tickwork.executors.base import ExecutionContext, Executor, ThreadRunsOn
from tickwork.frozen import direct
from tickwork.models import Claim
from tickwork.outcomes import Fail, Result, TimedOut
from tickwork.tasks import cancel_and_wait
from tickwork.worker.completer import Completer
from tickwork.worker.deadlines import Deadlines
from tickwork.worker.failpoints import failpoint
from tickwork.worker.outcomes import decide
from tickwork.worker.runlog import RunLog
from tickwork.worker.sources import ClaimSource, SqlClaimSource
from tickwork.worker.tracing import AttemptTracer

log = logging.getLogger("tickwork.worker")
ABANDON_SECONDS = 5.0  # see WorkerPool.abandon_seconds

# A fetcher with only a few free slots waits this long (real time: batching, not scheduling)
# for a quarter of its queue's slots to be free, so that under load one claim round trip
# serves many occurrences instead of one or two. Short enough to be lost in any job's run.
CLAIM_LINGER_SECONDS = 0.005

_new_context = direct(ExecutionContext)  # one per run: without a class call's keyword dict

THREAD_RUNS_ON = ("its synchronous callable runs in a thread, which cannot be stopped: it runs "
                  "to its end, and its result is discarded")


@dataclass(slots=True)
class _Running:
    claim: Claim
    key: tuple[str, datetime, int]  # its attempt's, in _Queue.running
    task: asyncio.Task[None] | None = None
    lost: bool = False  # the store no longer gives this attempt to us: drop its result
    ended_by_store: bool = False  # lost because the store ended it (cancelled, rescued)


@dataclass(slots=True)
class _Queue:
    name: str
    concurrency: int
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    # By attempt: a run rescued from this worker while it still runs here may be claimed
    # again by it (the next attempt) before the old one learns it lost its lease.
    running: dict[tuple[str, datetime, int], _Running] = field(default_factory=dict)

    @property
    def free(self) -> int:
        return self.concurrency - len(self.running)

    @property
    def batch_floor(self) -> int:
        """Free slots worth a claim while others run: a quarter of the queue."""
        return max(1, self.concurrency // 4)


class WorkerPool:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        executors: Mapping[str, Executor],
        queues: Sequence[tuple[str, int]],
        worker_id: str | None = None,
        lease_seconds: float = 30.0,
        heartbeat_seconds: float = 10.0,
        poll_interval_seconds: float = 1.0,
        shutdown_grace_seconds: float = 30.0,
        rng: random.Random | None = None,
        on_finished: Callable[[Claim, Result, Completion], None] | None = None,
        on_claimed: Callable[[str, int], None] | None = None,
        source: ClaimSource | None = None,
        run_log: RunLog | None = None,
        tracer: AttemptTracer | None = None,
    ) -> None:
        """``source``: where claims come from (default: the store, ``SqlClaimSource``).
        ``on_claimed``: told the queue and count of each batch claimed (metrics).
        ``run_log``: logs failures as they happen and a summary a minute (default: one).
        ``tracer``: a span per attempt (tickwork.worker.otel), or None: no tracing."""
        if heartbeat_seconds >= lease_seconds:
            raise ValueError(f"heartbeat_seconds ({heartbeat_seconds}) must be less than "
                             f"lease_seconds ({lease_seconds})")
        self.store = store
        self.clock = clock
        self.executors = executors
        self.worker_id = worker_id or f"worker-{uuid.uuid4().hex[:8]}"
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.poll_interval_seconds = poll_interval_seconds
        self.shutdown_grace_seconds = shutdown_grace_seconds
        # After the grace period, how long cancelled attempts may take to end before the
        # stop goes on without them (their leases released all the same).
        self.abandon_seconds = ABANDON_SECONDS
        self.rng = rng or random.Random()  # noqa: S311  (backoff jitter, not cryptography)
        self.on_finished = on_finished
        self.on_claimed = on_claimed
        self.run_log = run_log or RunLog()
        self.tracer = tracer
        self.queues = {name: _Queue(name, concurrency) for name, concurrency in queues}
        self.completer = Completer(store=store, clock=clock, on_chained=self._chained)
        self.deadlines = Deadlines(clock)
        self._settling: set[asyncio.Task[None]] = set()  # deliveries settled by a call
        self.source: ClaimSource = source or SqlClaimSource(
            store=store, clock=clock, worker_id=self.worker_id, lease_seconds=lease_seconds,
            poll_interval_seconds=poll_interval_seconds)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._beat_now = asyncio.Event()  # heartbeat_soon: a run was cancelled here
        self.released = 0  # attempts given back at stop: their threads may still be running

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.completer.start()
        self.source.start(self.wake)
        for q in self.queues.values():
            self._tasks.append(asyncio.create_task(self._fetch_loop(q), name=f"fetch-{q.name}"))
        self._tasks.append(asyncio.create_task(self._heartbeat_loop(), name="heartbeat"))

    def heartbeat_soon(self) -> None:
        """Heartbeat now, not at the next beat: a run was cancelled, and its attempt (if it
        runs here) stops as soon as the store says its lease is gone."""
        self._beat_now.set()

    async def _chained(self, occurrences: list[NewOccurrence]) -> None:
        await self.source.after_chained(occurrences)
        for queue in {o.queue for o in occurrences}:
            self.wake(queue)

    def wake(self, queue: str | None = None) -> None:
        """Look for due work now (new occurrences, a trigger, a rescue), not at the next poll."""
        for q in self.queues.values():
            if queue is None or q.name == queue:
                q.wake.set()

    @property
    def running_count(self) -> int:
        return sum(len(q.running) for q in self.queues.values())

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Stop claiming, let running attempts finish within the grace period, then give the
        rest back to the store without charging an attempt (G10)."""
        grace = self.shutdown_grace_seconds if grace_seconds is None else grace_seconds
        if self._stopping and not self._tasks:
            return  # stopped already
        self._stopping = True
        await cancel_and_wait(*self._tasks[:-1])  # the fetchers (through Redis, maybe)

        pending = [r.task for q in self.queues.values() for r in q.running.values() if r.task]
        if pending:
            log.info("waiting up to %gs for %d running attempts", grace, len(pending))
            sleeper = asyncio.ensure_future(self.clock.sleep(grace))
            await asyncio.wait([*pending, sleeper], return_when=asyncio.FIRST_COMPLETED)
            while not sleeper.done() and any(not t.done() for t in pending):
                await asyncio.wait([t for t in pending if not t.done()] + [sleeper],
                                   return_when=asyncio.FIRST_COMPLETED)
            sleeper.cancel()

        leftover = [r for q in self.queues.values() for r in q.running.values()]
        for r in leftover:
            r.lost = True
        stuck = await cancel_and_wait(*(r.task for r in leftover), within=self.abandon_seconds)
        if stuck:
            log.warning("%d running attempts went on after being cancelled (a job that catches "
                        "the cancellation?): released all the same and left behind",
                        len(stuck))
        if leftover:
            refs = [_ref(r.claim) for r in leftover]
            released = await self.store.occurrence_release(OccurrenceReleaseParams(
                refs=refs, worker=self.worker_id, now=self.clock.now()))
            self.released = released
            await self.source.released([r.claim for r in leftover])
            log.info("released %d unfinished attempts without charging them", released)
        await cancel_and_wait(self._tasks[-1])
        await self.completer.stop()
        await asyncio.gather(*self._settling, return_exceptions=True)
        await self.source.stop()
        self._tasks.clear()
        self.run_log.close()

    # -- claiming ----------------------------------------------------------------------------

    async def _fetch_loop(self, q: _Queue) -> None:
        while not self._stopping:
            try:
                now = await self._fetch_once(q)
                await self._sleep_until_work(q, now)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not reported_outage(exc):  # an outage is logged once, by the store
                    log.exception("claiming from queue %s failed; retrying", q.name)
                await self._wait(q.wake, self.poll_interval_seconds)

    async def _fetch_once(self, q: _Queue) -> datetime:
        """Claim while there are free slots and due work. Returns the time of the last look."""
        while True:
            if 0 < q.free < q.batch_floor and q.running:
                await self._linger(q)
            now = self.clock.now()
            free = q.free
            if free <= 0:
                return now
            q.wake.clear()
            result = await self.source.claim(q.name, free, now)
            if result.claims and self.on_claimed is not None:
                self.on_claimed(q.name, len(result.claims))
            for ref in result.cancelled:
                self._drop(ref, "a newer run of the job replaced it (overlap cancel_previous)")
            for claim in result.claims:
                occ = claim.occurrence
                running = _Running(claim, (occ.job_id, occ.scheduled_at, occ.attempt))
                q.running[running.key] = running
                running.task = asyncio.create_task(self._execute(q, running))
            if len(result.claims) < free and not (result.missed or result.skipped):
                return now

    @staticmethod
    async def _linger(q: _Queue) -> None:
        """Until a quarter of the slots are free, nothing runs, or the linger is over."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLAIM_LINGER_SECONDS
        while q.free < q.batch_floor and q.running:
            left = deadline - loop.time()
            if left <= 0:
                return
            q.wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await q.wake.wait()

    async def _sleep_until_work(self, q: _Queue, now: datetime) -> None:
        timeout = self.poll_interval_seconds
        if len(q.running) >= q.concurrency:
            # Full: a wake-up now (new work, a notification) cannot be acted on, and would
            # make _wait return at once, spinning. Freeing a slot sets the event again.
            q.wake.clear()
        else:
            timeout = await self.source.idle_seconds(q.name, now)
        if timeout > 0:
            await self._wait(q.wake, timeout)

    async def _wait(self, event: asyncio.Event, seconds: float) -> None:
        """Until the event is set or ``seconds`` pass on the injected clock."""
        await wait_event(self.clock, event, seconds)

    # -- executing ---------------------------------------------------------------------------

    async def _execute(self, q: _Queue, running: _Running) -> None:
        claim = running.claim
        occ, job = claim.occurrence, claim.job
        started = self.clock.now()
        timeout = job.spec.timeout_seconds
        span = None if self.tracer is None else self.tracer.start(claim)
        ctx = _new_context(
            job_id=job.id, job_name=job.spec.name, kind=job.spec.kind, payload=job.spec.payload,
            scheduled_at=occ.scheduled_at, attempt=occ.attempt,
            max_attempts=job.spec.retry.max_attempts, idempotency_key=occ.idempotency_key,
            deadline=started + delta(timeout), timeout_seconds=timeout,
            trace_headers={} if span is None else span.headers,
            upstream=occ.upstream, namespace=job.namespace,
        )
        try:
            result = await self._run_with_timeout(ctx)
        except asyncio.CancelledError as exc:
            if span is not None:
                span.end(None, None)
            q.running.pop(running.key, None)
            if not running.lost:
                raise
            q.wake.set()
            if running.ended_by_store and isinstance(exc, ThreadRunsOn):
                await self._note_thread_runs_on(claim)
            await self._settle_dropped(running)
            return  # cancelled because the lease is gone or we are shutting down: no result
        finished = self.clock.now()
        q.running.pop(running.key, None)
        q.wake.set()  # a slot is free
        if running.lost:
            if span is not None:
                span.end(None, None)
            await self._settle_dropped(running)
            return
        completion = decide(claim, result, started_at=started, finished_at=finished, rng=self.rng)
        spec = job.spec
        if spec.on_success or spec.on_failure or spec.on_dead:  # it names jobs to trigger
            fire = chain_fire(spec, job_id=job.id, scheduled_at=occ.scheduled_at,
                              attempt=occ.attempt, idempotency_key=occ.idempotency_key,
                              state=completion.state, output=completion.output)
            if fire is not None:  # written with the completion, in its transaction
                completion = replace(completion, chain=fire)
        if span is not None:
            span.end(result, completion)
        if self.on_finished is not None:
            self.on_finished(claim, result, completion)
        self.run_log.finished(claim, completion)
        failpoint("after_execute")  # fault tests: die with the result unwritten
        # The run ends here: the completer settles its delivery once the store has answered.
        self.completer.hand_over(completion, functools.partial(self._written, claim,
                                                               completion))

    def _written(self, claim: Claim, completion: Completion, applied: bool) -> None:
        """The store answered for a run's result: its delivery is settled; what needs a call
        (to Redis) runs in a task of its own, which a stop waits for."""
        try:
            step = self.source.settle(claim, completion, applied)
        except Exception:
            log.exception("settling the delivery of %s failed", claim.occurrence.job_id)
            return
        if step is not None:
            task = asyncio.create_task(_logged(step, "settling a delivery failed"))
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)

    async def _settle_dropped(self, running: _Running) -> None:
        """A run the store ended while it ran here: its delivery is settled (at a graceful
        stop the runs are released instead)."""
        if not running.ended_by_store:
            return
        try:
            await self.source.dropped(running.claim)
        except Exception as exc:  # its delivery is reclaimed later and decided again
            if not reported_outage(exc):
                log.exception("settling a dropped run failed")

    async def _note_thread_runs_on(self, claim: Claim) -> None:
        """The store ended an attempt whose callable runs in a thread: say so on the attempt
        and its run, since the callable goes on (its result is discarded)."""
        log.warning("%s @ %s attempt %d: %s", claim.job.spec.name,
                    claim.occurrence.scheduled_at.isoformat(), claim.occurrence.attempt,
                    THREAD_RUNS_ON)
        try:
            await self.store.attempt_note(AttemptNoteParams(ref=_ref(claim),
                                                            note=THREAD_RUNS_ON))
        except Exception as exc:  # the log line above says it already
            if not reported_outage(exc):
                log.exception("noting the attempt failed")

    async def _run_with_timeout(self, ctx: ExecutionContext) -> Result:
        executor = self.executors.get(ctx.kind)
        if executor is None:
            return Fail(f"this worker has no executor for kind {ctx.kind!r}", retriable=False)
        # The deadline is armed before the job's first step runs; the job runs in this task
        # (no task or timer of its own: the pool's runs share one alarm, worker/deadlines.py).
        deadline = self.deadlines.start(ctx.timeout_seconds)
        try:
            with deadline:
                result = await executor.execute(ctx)
        except TimeoutError as exc:
            if not deadline.expired():  # the job's own TimeoutError
                return self._raised(ctx, exc)
        except Exception as exc:
            return self._raised(ctx, exc)
        # Expired also when the job swallowed the cancellation and returned anyway.
        return TimedOut(ctx.timeout_seconds) if deadline.expired() else result

    @staticmethod
    def _raised(ctx: ExecutionContext, exc: Exception) -> Result:
        log.exception("executor %s raised", ctx.kind, exc_info=exc)
        return Fail(f"executor error: {type(exc).__name__}: {exc}")

    # -- leases ------------------------------------------------------------------------------

    async def _heartbeat_loop(self) -> None:
        while True:
            await wait_event(self.clock, self._beat_now, self.heartbeat_seconds)
            self._beat_now.clear()
            try:
                await self.heartbeat_once(self.clock.now())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not reported_outage(exc):
                    log.exception("heartbeat failed; leases may expire if this persists")

    async def heartbeat_once(self, now: datetime) -> list[LeaseRef]:
        refs = [_ref(r.claim) for q in self.queues.values() for r in q.running.values()]
        if not refs:
            return []
        lost = await self.store.occurrence_heartbeat(OccurrenceHeartbeatParams(
            refs=refs, worker=self.worker_id, now=now, extend_seconds=self.lease_seconds))
        for ref in lost:
            self._drop(ref, "its lease is no longer held (cancelled, rescued or finished)")
        await self.source.heartbeat([r.claim for q in self.queues.values()
                                     for r in q.running.values() if not r.lost])
        return lost

    def _drop(self, ref: LeaseRef, why: str) -> None:
        for q in self.queues.values():
            running = q.running.get(_attempt_key(ref))
            if running is not None:
                log.warning("stopping %s @ %s attempt %d: %s", ref.job_id,
                            ref.scheduled_at.isoformat(), ref.attempt, why)
                running.lost = True
                running.ended_by_store = True
                if running.task is not None:
                    running.task.cancel()


async def _logged(step: Coroutine[Any, Any, None], failure: str) -> None:
    try:
        await step
    except Exception as exc:
        if not reported_outage(exc):
            log.exception(failure)


def _attempt_key(ref: LeaseRef) -> tuple[str, datetime, int]:
    return (ref.job_id, ref.scheduled_at, ref.attempt)


def _ref(claim: Claim) -> LeaseRef:
    occ = claim.occurrence
    return LeaseRef(job_id=occ.job_id, scheduled_at=occ.scheduled_at, attempt=occ.attempt)
