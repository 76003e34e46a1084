"""On PostgreSQL + Redis: a run that goes dead through the Redis path raises its alert, a run
claimed through Redis that runs too long raises one and resolves it when cancelled, and the
alerts reach a real local webhook receiver."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

from test_alerts import Receiver, receiver  # noqa: F401  (receiver: a fixture)
from test_redis_worker import Stack, stack  # noqa: F401  (stack: a fixture)

from tickwork.drivers.alerts import AlertListParams
from tickwork.models import OccurrenceState, rfc3339
from tickwork.scheduler.alert_delivery import AlertDeliverer
from tickwork.scheduler.alerts import AlertEvaluator
from tickwork.testing.jobs import EVENTS


async def test_a_dead_run_raises_its_alert(stack: Stack, receiver: Receiver) -> None:  # noqa: F811
    at = stack.clock.now()
    [job] = await stack.client.create_jobs([{
        "name": "doomed", "schedule": {"at": rfc3339(at)}, "kind": "python",
        "payload": {"callable": "tickwork.testing.jobs:fail_fatal", "args": ["no luck"]},
        "alerts": {"channels": [{"kind": "webhook", "url": f"{receiver.url}/hook"}]}}])
    assert (await stack.planner.run_once(at))[0] == 1
    assert (await stack.redis.promoter.run_once()).moved == 1
    stack.start()
    [done] = await stack.completed(1)
    assert done.state is OccurrenceState.DEAD
    deliverer = AlertDeliverer(store=stack.store, clock=stack.clock,
                               executors=stack.pool.executors)
    evaluator = AlertEvaluator(store=stack.store, clock=stack.clock)
    assert await evaluator.run_once(stack.clock.now()) == 1
    assert await deliverer.run_once(stack.clock.now()) == 1
    [alert] = await stack.store.alert_list(AlertListParams(job_id=job.id))
    assert (alert.condition, alert.state, alert.deliveries[0].state) == (
        "failed", "firing", "delivered")
    [seen] = receiver.seen
    assert seen["json"]["job_name"] == "doomed"
    assert "ended dead" in seen["json"]["detail"]


async def test_a_run_claimed_through_redis_running_too_long_fires_and_resolves(
        stack: Stack, receiver: Receiver) -> None:  # noqa: F811
    name = "alert-slow"
    EVENTS[f"{name}:started"] = threading.Event()
    EVENTS[name] = threading.Event()
    stack.client.on_cancel = stack.pool.heartbeat_soon
    at = stack.clock.now()
    [job] = await stack.client.create_jobs([{
        "name": "slow", "schedule": {"at": rfc3339(at)}, "kind": "python",
        "payload": {"callable": "tickwork.testing.jobs:wait_forever", "args": [name]},
        "timeout_seconds": 300,
        "alerts": {"channels": [{"kind": "webhook", "url": f"{receiver.url}/hook"}],
                   "on": [], "running_longer_than": "1m"}}])
    assert (await stack.planner.run_once(at))[0] == 1
    assert (await stack.redis.promoter.run_once()).moved == 1
    stack.start()
    assert await asyncio.to_thread(EVENTS[f"{name}:started"].wait, 10)
    deliverer = AlertDeliverer(store=stack.store, clock=stack.clock,
                               executors=stack.pool.executors)
    evaluator = AlertEvaluator(store=stack.store, clock=stack.clock)
    assert await evaluator.run_once(at + timedelta(seconds=59)) == 0
    assert await evaluator.run_once(at + timedelta(seconds=61)) == 1
    assert await deliverer.run_once(at + timedelta(seconds=61)) == 1
    [alert] = await stack.store.alert_list(AlertListParams(job_id=job.id))
    assert (alert.condition, alert.state) == ("running_too_long", "firing")
    await stack.client.cancel_run("slow", at, actor="ops")
    assert await asyncio.to_thread(EVENTS[name].wait, 10)  # its worker stopped it
    assert await evaluator.run_once(at + timedelta(seconds=62)) == 1
    assert await deliverer.run_once(at + timedelta(seconds=62)) == 1
    [alert] = await stack.store.alert_list(AlertListParams(job_id=job.id))
    assert alert.state == "resolved"
    assert [(s["json"]["type"], s["json"]["condition"]) for s in receiver.seen] == [
        ("alert.firing", "running_too_long"), ("alert.resolved", "running_too_long")]
