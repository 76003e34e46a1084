"""The limits conformance suite (drivers/limits.py): every store driver passes it.

A driver's test module subclasses ``LimitConformance`` and defines ``store`` (a fresh, migrated
Store); limits are set through ``store.admin()``, as the API and CLI set them. Claims by queue
(``occurrence_claim``) and by key (``occurrence_claim_keys``, the Redis dispatch path) both
obey them. Instants come from ``factories.NOW``; nothing reads a clock or sleeps.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tickwork.drivers.admin import QueueListParams
from tickwork.drivers.base import OccurrenceClaimKeysParams, Store
from tickwork.drivers.limits import (
    KeyLimitSetParams,
    LimitNotFound,
    LimitOwners,
    QueueLimitsSetParams,
    Rate,
    parse_rate,
)
from tickwork.models import Job, Overlap
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim,
    complete,
    completion,
    seconds,
)

__all__ = ["LimitConformance"]


async def _jobs(store: Store, count: int, *, queue: str = "default", **spec: Any
                ) -> list[Job]:
    jobs = []
    for i in range(count):
        job = await add_job(store, f"{queue}-{i}", queue=queue, **spec)
        await add_occurrences(store, job, NOW)
        jobs.append(job)
    return jobs


async def _limit_queue(store: Store, name: str = "default", *, max_running: int | None = None,
                       rate: str | None = None, burst: int | None = None,
                       now: datetime = NOW) -> None:
    await store.admin().queue_limits_set(QueueLimitsSetParams(
        name=name, now=now, max_running=max_running,
        rate=parse_rate(rate) if rate else None, burst=burst))


class LimitConformance:
    async def test_a_queue_without_limits_claims_as_before(self, store: Store) -> None:
        await _jobs(store, 3)
        result = await claim(store, NOW)
        assert (len(result.claims), result.held) == (3, 0)

    async def test_max_running_caps_running_attempts_across_claims(self, store: Store) -> None:
        await _jobs(store, 5)
        await _limit_queue(store, max_running=2)
        first = await claim(store, NOW, worker="w1")
        second = await claim(store, NOW, worker="w2")
        assert (len(first.claims), first.held) == (2, 3)
        assert (len(second.claims), second.held) == (0, 3)
        await complete(store, NOW + seconds(1), completion(first.claims[0]))
        third = await claim(store, NOW + seconds(1), worker="w2")
        assert len(third.claims) == 1  # one slot came back when its attempt ended

    async def test_an_expired_lease_gives_its_slot_back(self, store: Store) -> None:
        await _jobs(store, 2)
        await _limit_queue(store, max_running=1)
        first = await claim(store, NOW, lease_seconds=10, lease_margin_seconds=0)
        assert len(first.claims) == 1
        assert len((await claim(store, NOW + seconds(9))).claims) == 0
        later = await claim(store, NOW + seconds(31))  # the lease (the job's 30 s timeout) ran out
        assert len(later.claims) == 1

    async def test_a_run_held_by_a_limit_is_not_missed_and_keeps_its_attempts(
            self, store: Store) -> None:
        await _jobs(store, 2, catchup_window_seconds=60)
        await _limit_queue(store, max_running=1)
        first = await claim(store, NOW)
        await complete(store, NOW + seconds(200), completion(first.claims[0]))
        later = await claim(store, NOW + seconds(200))  # past the catch-up window by far
        assert (len(later.claims), later.missed) == (1, 0)
        held = later.claims[0]
        assert held.occurrence.attempt == 1  # waiting charged no attempt
        assert held.limited_at == NOW  # when the limit first held it
        assert first.claims[0].limited_at is None

    async def test_a_rate_refills_at_its_pace_up_to_its_burst(self, store: Store) -> None:
        await _jobs(store, 10)
        await _limit_queue(store, rate="2/s", burst=3)
        assert len((await claim(store, NOW)).claims) == 3  # the burst
        assert len((await claim(store, NOW + seconds(0.4))).claims) == 0
        assert len((await claim(store, NOW + seconds(0.5))).claims) == 1
        assert len((await claim(store, NOW + seconds(10))).claims) == 3  # never above the burst

    async def test_a_held_claim_says_when_to_look_again(self, store: Store) -> None:
        await _jobs(store, 5)
        assert (await claim(store, NOW, limit=1)).recheck_at is None  # nothing held
        await _limit_queue(store, rate="2/s", burst=1)
        result = await claim(store, NOW + seconds(1))
        assert result.recheck_at == NOW + seconds(1.5)  # the next token
        await _limit_queue(store, max_running=1)
        slot = await claim(store, NOW + seconds(2))
        assert slot.claims == []
        assert slot.recheck_at == NOW + seconds(2.1)  # a slot: soon, or when one of ours ends

    async def test_a_limit_key_is_shared_across_queues(self, store: Store) -> None:
        await _jobs(store, 2, queue="a", limit_key="api")
        await _jobs(store, 2, queue="b", limit_key="api")
        await store.admin().key_limit_set(KeyLimitSetParams(
            key="api", rate=Rate(2, 60.0), now=NOW, burst=2))
        a = await claim(store, NOW, queue="a")
        b = await claim(store, NOW, queue="b")
        assert (len(a.claims), len(b.claims), b.held) == (2, 0, 2)
        assert len((await claim(store, NOW + seconds(30), queue="b")).claims) == 1

    async def test_a_key_without_a_limit_does_not_hold(self, store: Store) -> None:
        await _jobs(store, 2, limit_key="nobody-set-this")
        assert len((await claim(store, NOW)).claims) == 2

    async def test_max_concurrency_caps_an_allow_all_job(self, store: Store) -> None:
        job = await add_job(store, "fan", overlap=Overlap.ALLOW_ALL, max_concurrency=2)
        await add_occurrences(store, job, *(NOW + seconds(i) for i in range(4)))
        first = await claim(store, NOW + seconds(5))
        assert (len(first.claims), first.held) == (2, 2)
        await complete(store, NOW + seconds(6), completion(first.claims[0]))
        assert len((await claim(store, NOW + seconds(6))).claims) == 1

    async def test_claims_by_key_obey_limits_and_say_when_to_look_again(
            self, store: Store) -> None:
        jobs = await _jobs(store, 3)
        await _limit_queue(store, rate="1/s", burst=1)
        result = await store.occurrence_claim_keys(OccurrenceClaimKeysParams(
            keys=[(j.id, NOW) for j in jobs], worker="w1", now=NOW))
        assert (len(result.claims), result.held) == (1, 2)
        again = sorted(due for _, _, due in result.not_due)
        assert len(again) == 2
        assert all(due > NOW for due in again)  # with the bucket's refill

    async def test_limits_are_listed_with_their_usage(self, store: Store) -> None:
        await _jobs(store, 3)
        await _limit_queue(store, max_running=5, rate="50/s", burst=10)
        await claim(store, NOW)
        queues = await store.admin().queue_list(QueueListParams(now=NOW))
        q = next(q for q in queues if q.name == "default")
        assert (q.max_running, q.rate, q.burst, q.running) == (5, Rate(50, 1.0), 10, 3)
        assert q.tokens == pytest.approx(7)
        await _limit_queue(store)  # no values: no limits
        q = (await store.admin().queue_list(QueueListParams(now=NOW)))[0]
        assert (q.max_running, q.rate, q.burst, q.tokens) == (None, None, None, None)

    async def test_key_limits_are_set_listed_and_deleted(self, store: Store) -> None:
        admin = store.admin()
        info = await admin.key_limit_set(KeyLimitSetParams(key="api", rate=Rate(100, 60.0),
                                                           now=NOW))
        assert (info.key, info.rate, info.burst, info.tokens) == ("api", Rate(100, 60.0), 100,
                                                                  100)
        await admin.key_limit_set(KeyLimitSetParams(key="api", rate=Rate(5, 1.0), now=NOW,
                                                    burst=2))
        listed = await admin.key_limit_list(NOW)
        assert [(k.key, k.rate, k.burst) for k in listed] == [("api", Rate(5, 1.0), 2)]
        await admin.key_limit_delete("api")
        assert await admin.key_limit_list(NOW) == []
        with pytest.raises(LimitNotFound):
            await admin.key_limit_delete("api")

    async def test_owners_are_set_kept_and_read_back(self, store: Store) -> None:
        """A queue or key is shared (no owner) until given to a namespace; setting its
        limits without ``set_namespace`` keeps the owner."""
        admin = store.admin()
        await _limit_queue(store, "acme-q", max_running=2)
        await admin.key_limit_set(KeyLimitSetParams(key="acme-k", rate=Rate(1, 1.0), now=NOW))
        assert await admin.limit_owners() == LimitOwners()
        await admin.queue_limits_set(QueueLimitsSetParams(
            name="acme-q", now=NOW, max_running=3, namespace="acme", set_namespace=True))
        info = await admin.key_limit_set(KeyLimitSetParams(
            key="acme-k", rate=Rate(2, 1.0), now=NOW, namespace="acme", set_namespace=True))
        assert info.namespace == "acme"
        await _limit_queue(store, "acme-q", max_running=4)  # the owner stays
        kept = await admin.key_limit_set(KeyLimitSetParams(key="acme-k", rate=Rate(3, 1.0),
                                                           now=NOW))
        assert kept.namespace == "acme"
        await _limit_queue(store, "shared-q", max_running=1)
        assert await admin.limit_owners() == LimitOwners(queues={"acme-q": "acme"},
                                                         keys={"acme-k": "acme"})
        every = await admin.queue_list(QueueListParams(now=NOW))
        assert [(q.name, q.namespace, q.max_running) for q in every] == [
            ("acme-q", "acme", 4), ("shared-q", None, 1)]
        # Another namespace does not see them; the owner and everyone do.
        for namespace, queues, keys in (("globex", ["shared-q"], []),
                                        ("acme", ["acme-q", "shared-q"], ["acme-k"])):
            seen = await admin.queue_list(QueueListParams(now=NOW, namespace=namespace))
            assert [q.name for q in seen] == queues
            assert [k.key for k in await admin.key_limit_list(NOW, namespace)] == keys
        await admin.queue_limits_set(QueueLimitsSetParams(name="acme-q", now=NOW,
                                                          set_namespace=True))
        assert await admin.limit_owners() == LimitOwners(keys={"acme-k": "acme"})
