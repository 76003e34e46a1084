"""On PostgreSQL + Redis: a run that goes dead through the Redis path raises its alert, and
the alert reaches a real local webhook receiver."""

from __future__ import annotations

from test_alerts import Receiver, receiver  # noqa: F401  (receiver: a fixture)
from test_redis_worker import Stack, stack  # noqa: F401  (stack: a fixture)

from tickwork.drivers.alerts import AlertListParams
from tickwork.models import OccurrenceState, rfc3339
from tickwork.scheduler.alert_delivery import AlertDeliverer
from tickwork.scheduler.alerts import AlertEvaluator


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
