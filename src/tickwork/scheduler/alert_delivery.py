"""The alert delivery loop: sends what the evaluator recorded, retries it, records each try.

Deliveries are claimed from the store with a lease (one sender per delivery, whichever
process claims it), sent through the executors of the job kinds they use (slack, email,
http, publish: the same outbound guard and secret resolution as jobs), each within a timeout, and
their result written back fenced on the attempt number. A failing channel costs this loop a
timeout at most; it never holds up planning, which runs in loops of its own.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

from tickwork.clock import Clock
from tickwork.drivers.alerts import AlertDelivery, DeliveryClaimParams, DeliveryFinishParams
from tickwork.drivers.base import Store
from tickwork.executors.base import ExecutionContext, Executor
from tickwork.outcomes import Fail, Success
from tickwork.scheduler.loop import Loop

JOB_KINDS = {"slack": "slack", "email": "email", "webhook": "http", "publish": "publish"}
BATCH = 20


class AlertDeliverer(Loop):
    name = "alert-delivery"

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        executors: dict[str, Executor],
        interval_seconds: float = 1.0,
        timeout_seconds: float = 10.0,
        max_attempts: int = 5,
        backoff_base_seconds: float = 5.0,
        backoff_max_seconds: float = 300.0,
    ) -> None:
        super().__init__(clock=clock, interval_seconds=interval_seconds)
        if max_attempts < 1 or timeout_seconds <= 0:
            raise ValueError("max_attempts must be at least 1 and timeout_seconds positive")
        self.store = store
        self.executors = executors
        self.timeout_seconds = timeout_seconds
        self.max_attempts = max_attempts
        self.backoff_base_seconds = backoff_base_seconds
        self.backoff_max_seconds = backoff_max_seconds

    async def run_once(self, now: datetime) -> int:
        """Send the deliveries due by ``now``; returns how many were tried."""
        taken = await self.store.delivery_claim(DeliveryClaimParams(
            now=now, limit=BATCH, lease_seconds=2 * self.timeout_seconds + 5))
        await asyncio.gather(*(self._send(d, now) for d in taken))
        return len(taken)

    def backoff(self, attempts: int) -> float:
        return float(min(self.backoff_base_seconds * 2.0 ** (attempts - 1),
                         self.backoff_max_seconds))

    async def _send(self, d: AlertDelivery, now: datetime) -> None:
        error = await self._try(d, now)
        if error is not None:
            self._log.warning("alert delivery %s (%s, attempt %d of %d) failed: %s", d.id,
                              d.kind, d.attempts, self.max_attempts, error)
        retry_at = None
        if error is not None and d.attempts < self.max_attempts:
            retry_at = now + timedelta(seconds=self.backoff(d.attempts))
        await self.store.delivery_finish(DeliveryFinishParams(
            id=d.id, attempt=d.attempts, now=self.clock.now(), error=error, retry_at=retry_at))

    async def _try(self, d: AlertDelivery, now: datetime) -> str | None:
        kind = JOB_KINDS.get(d.kind, d.kind)
        executor = self.executors.get(kind)
        if executor is None:
            return f"no {kind} executor in this process"
        ctx = ExecutionContext(
            job_id=d.alert_id, job_name=f"alert {d.alert_id}", kind=kind,
            payload=json.loads(d.payload), scheduled_at=d.created_at, attempt=d.attempts,
            max_attempts=self.max_attempts, idempotency_key=f"alert:{d.id}",
            deadline=now + timedelta(seconds=self.timeout_seconds),
            timeout_seconds=self.timeout_seconds, namespace=d.namespace)
        try:
            # The executors keep to the context's timeout; this bounds anything else.
            outcome = await asyncio.wait_for(executor.execute(ctx), self.timeout_seconds + 1)
        except TimeoutError:
            return f"no answer within {self.timeout_seconds:g}s"
        if isinstance(outcome, Success):
            return None
        if isinstance(outcome, Fail):
            return outcome.error[:1000]
        return str(outcome)[:1000]

    async def step(self, now: datetime) -> float:
        return 0.0 if await self.run_once(now) >= BATCH else self.interval_seconds
