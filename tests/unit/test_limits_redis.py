"""Limits on the Redis dispatch path: the store's claim by key holds what a limit holds (a
namespace's hourly quota too), and the worker's Redis source re-arms it in the due set for
when the limit lets it start, so nothing is lost and nothing is charged an attempt.
PostgreSQL and the shared Redis server, with a key prefix per test."""

from __future__ import annotations

from datetime import timedelta

from test_redis_worker import Stack, put, settled, stack  # noqa: F401  (stack: a fixture)

from tickwork.document.limits import Limits
from tickwork.drivers.base import OccurrenceInsertParams
from tickwork.drivers.dispatch import DuePromoteParams, QueueStatsParams
from tickwork.drivers.limits import Rate, next_hour
from tickwork.testing.factories import add_job, complete, completion, new_occurrence


async def _due_jobs(stack: Stack, count: int) -> None:  # noqa: F811  (the fixture's value)
    now = stack.clock.now()
    for i in range(count):
        job = await add_job(stack.store, f"j{i}", now=now)
        await stack.store.occurrence_insert(OccurrenceInsertParams(
            occurrences=[new_occurrence(job, now)], now=now))
        await put(stack, job.id, now, due=now)


async def test_max_running_holds_deliveries_and_re_arms_them(
        stack: Stack) -> None:  # noqa: F811
    await stack.client.set_queue_limits("default", Limits(max_running=1))
    await _due_jobs(stack, 3)
    now = stack.clock.now()
    first = await stack.source.claim("default", 8, now)
    assert (len(first.claims), first.held) == (1, 2)
    await stack.source.stop()  # flushes the acks
    stats = await stack.dispatch.queue_stats(QueueStatsParams("default"))
    assert (stats.due, stats.pending) == (2, 1)  # re-armed; the running one's entry pending
    (running,) = first.claims
    await complete(stack.store, now, completion(running))
    await settled(stack.source, running, completion(running))
    later = now + timedelta(seconds=1)
    assert (await stack.dispatch.due_promote(DuePromoteParams("default"))).moved == 2
    second = await stack.source.claim("default", 8, later)
    assert (len(second.claims), second.held) == (1, 1)
    assert second.claims[0].occurrence.attempt == 1


async def test_a_named_rate_limit_re_arms_at_its_next_token(
        stack: Stack) -> None:  # noqa: F811
    await stack.client.set_limit("api", Limits(rate=Rate(1, 60.0), burst=1))
    now = stack.clock.now()
    job = await add_job(stack.store, "a", now=now, limit_key="api")
    other = await add_job(stack.store, "b", now=now, limit_key="api")
    for j in (job, other):
        await stack.store.occurrence_insert(OccurrenceInsertParams(
            occurrences=[new_occurrence(j, now)], now=now))
        await put(stack, j.id, now, due=now)
    result = await stack.source.claim("default", 8, now)
    assert (len(result.claims), result.held) == (1, 1)
    await stack.source.stop()
    due_key = stack.dispatch.keys.due("default")
    (_, score), = await stack.dispatch.client.zrange(due_key, 0, -1, withscores=True)
    waited = score / 1000 - now.timestamp()
    assert 59 <= waited <= 61  # one token a minute: delivered again when it is there


async def test_an_hourly_quota_re_arms_its_runs_for_the_top_of_the_hour(
        stack: Stack) -> None:  # noqa: F811
    await stack.client.set_quotas("default", {"max_runs_per_hour": 1})
    await _due_jobs(stack, 3)
    now = stack.clock.now()
    result = await stack.source.claim("default", 8, now)
    assert (len(result.claims), result.held) == (1, 2)
    await stack.source.stop()
    stats = await stack.dispatch.queue_stats(QueueStatsParams("default"))
    assert (stats.due, stats.pending) == (2, 1)  # re-armed, uncharged
    due_key = stack.dispatch.keys.due("default")
    scores = [s for _, s in await stack.dispatch.client.zrange(due_key, 0, -1, withscores=True)]
    assert scores == [next_hour(now).timestamp() * 1000] * 2  # when the hour turns
