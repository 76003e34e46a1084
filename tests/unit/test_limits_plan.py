"""plan_claims under limits (drivers/limits.py), decided without a store: a budget per queue
and per key, a namespace's hourly quota, a job's max_concurrency, and what a held run is
spared."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from test_claiming import NOW, cand, running_ref

from tickwork.drivers.claiming import Candidate, held_by_limits, plan_claims, recheck_at
from tickwork.drivers.limits import (
    KEY_BUCKET,
    QUEUE_BUCKET,
    Budget,
    HourQuota,
    budget_of,
    next_hour,
)
from tickwork.models import Overlap


def in_queue(c: Candidate, queue: str = "q", key: str | None = None) -> Candidate:
    return replace(c, queue=queue, spec=replace(c.spec, limit_key=key))


def test_a_queue_budget_takes_the_first_in_claim_order_and_holds_the_rest() -> None:
    cs = [in_queue(cand(f"j{i}", 10 - i)) for i in range(4)]
    p = plan_claims(cs, {}, NOW, 10, budget=Budget(slots={"q": 2}))
    assert [c.job_id for c in p.claim] == ["j0", "j1"]
    assert [c.job_id for c in p.held] == ["j2", "j3"]


def test_tokens_are_spent_and_counted_per_bucket() -> None:
    cs = [in_queue(cand("a", 3), key="api"), in_queue(cand("b", 2), key="api"),
          in_queue(cand("c", 1))]
    budget = Budget(tokens={(QUEUE_BUCKET, "q"): 5, (KEY_BUCKET, "api"): 1})
    p = plan_claims(cs, {}, NOW, 10, budget=budget)
    assert [c.job_id for c in p.claim] == ["a", "c"]  # c names no key: only the queue's rate
    assert budget.taken == {(QUEUE_BUCKET, "q"): 2, (KEY_BUCKET, "api"): 1}


def test_a_held_run_past_its_catchup_window_is_not_missed() -> None:
    held = replace(in_queue(cand("j", 7200)), limited_at=NOW - timedelta(seconds=7000))
    fresh = in_queue(cand("k", 7200))
    p = plan_claims([held, fresh], {}, NOW, 10, budget=Budget(slots={"q": 1}))
    assert [c.job_id for c in p.claim] == ["j"]
    assert [c.job_id for c in p.missed] == ["k"]  # never held: its window ran out


def test_cancel_previous_held_by_a_limit_leaves_the_running_one_alone() -> None:
    c = in_queue(cand("j", 1, Overlap.CANCEL_PREVIOUS))
    p = plan_claims([c], {"j": [running_ref("j")]}, NOW, 10, budget=Budget(slots={"q": 0}))
    assert (p.claim, p.cancel_running, [h.job_id for h in p.held]) == ([], [], ["j"])


def test_max_concurrency_counts_running_and_taken_runs() -> None:
    def fan(ago: float) -> Candidate:
        c = cand("fan", ago, Overlap.ALLOW_ALL)
        return replace(c, spec=replace(c.spec, max_concurrency=3))

    p = plan_claims([fan(3), fan(2), fan(1)], {"fan": [running_ref("fan")]}, NOW, 10)
    assert len(p.claim) == 2
    assert len(p.held) == 1


def test_an_hourly_quota_holds_its_namespace_until_the_top_of_the_hour() -> None:
    now = NOW.replace(minute=45)
    cs = [replace(in_queue(cand(f"a{i}", 0)), namespace="a") for i in range(3)]
    cs.append(replace(in_queue(cand("b0", 0)), namespace="b"))
    budget = budget_of([], {}, now, [HourQuota("a", 10, 8)])
    p = plan_claims(cs, {}, now, 10, budget=budget)
    assert sorted(c.job_id for c in p.claim) == ["a0", "a1", "b0"]  # b has no quota
    assert [c.job_id for c in p.held] == ["a2"]
    assert budget.runs_taken == {"a": 2}
    (again,) = held_by_limits(p, budget, now)
    assert again[2] == next_hour(now) == NOW.replace(minute=0) + timedelta(hours=1)
    assert recheck_at(p, budget, now) == next_hour(now)
