"""Backoff (G5): ceilings double then cap, each jitter mode stays in its bounds."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from tickwork.models import RetryPolicy
from tickwork.retry import backoff_ceiling, backoff_delay, worst_case_retry_span

POLICY = RetryPolicy(max_attempts=10, backoff_base_seconds=2.0, backoff_max_seconds=300.0)


def test_ceilings_double_then_cap() -> None:
    ceilings = [backoff_ceiling(POLICY, n) for n in range(1, 12)]
    assert ceilings == [2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    assert backoff_ceiling(POLICY, 10_000) == 300  # no float overflow on absurd attempt numbers


def test_none_strictly_grows_until_the_cap() -> None:
    policy = RetryPolicy(backoff_base_seconds=0.5, backoff_max_seconds=100.0, jitter="none")
    rng = random.Random(0)
    delays = [backoff_delay(policy, n, rng) for n in range(1, 20)]
    capped = delays.index(100.0)
    assert all(a < b for a, b in pairwise(delays[:capped + 1]))
    assert delays[capped:] == [100.0] * (len(delays) - capped)
    assert delays[0] == 0.5


@pytest.mark.parametrize("attempt", [1, 2, 5, 9, 30])
def test_full_jitter_bounds(attempt: int) -> None:
    policy = RetryPolicy(backoff_base_seconds=2.0, backoff_max_seconds=300.0, jitter="full")
    ceiling = backoff_ceiling(policy, attempt)
    delays = [backoff_delay(policy, attempt, random.Random(seed)) for seed in range(2000)]
    assert all(0.0 <= d <= ceiling for d in delays)
    assert min(delays) < ceiling * 0.05  # spread over the whole range
    assert max(delays) > ceiling * 0.95


@pytest.mark.parametrize("attempt", [1, 2, 5, 9, 30])
def test_equal_jitter_bounds(attempt: int) -> None:
    policy = RetryPolicy(backoff_base_seconds=2.0, backoff_max_seconds=300.0, jitter="equal")
    ceiling = backoff_ceiling(policy, attempt)
    delays = [backoff_delay(policy, attempt, random.Random(seed)) for seed in range(2000)]
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert min(delays) < ceiling * 0.55
    assert max(delays) > ceiling * 0.95


def test_same_seed_same_delay() -> None:
    policy = RetryPolicy(jitter="full")
    assert backoff_delay(policy, 3, random.Random(7)) == backoff_delay(policy, 3, random.Random(7))


def test_base_above_max_is_capped_and_zero_base_is_zero() -> None:
    assert backoff_ceiling(RetryPolicy(backoff_base_seconds=500, backoff_max_seconds=60), 1) == 60
    zero = RetryPolicy(backoff_base_seconds=0, backoff_max_seconds=60, jitter="full")
    assert backoff_delay(zero, 4, random.Random(1)) == 0


def test_rejects_bad_attempts_and_modes() -> None:
    with pytest.raises(ValueError, match="attempt numbers start at 1"):
        backoff_delay(POLICY, 0, random.Random(0))
    with pytest.raises(ValueError, match="unknown jitter mode 'half'"):
        backoff_delay(RetryPolicy(jitter="half"), 1, random.Random(0))  # type: ignore[arg-type]


def test_worst_case_retry_span() -> None:
    # 3 attempts of 30 s, waits of 2 s and 4 s.
    assert worst_case_retry_span(RetryPolicy(max_attempts=3), 30.0) == 3 * 30 + 2 + 4
    assert worst_case_retry_span(RetryPolicy(max_attempts=1), 30.0) == 30
    # Waits 2, 4, ..., 256, then capped at 300 for the remaining ones.
    policy = RetryPolicy(max_attempts=12, backoff_base_seconds=2, backoff_max_seconds=300)
    waits = [2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    assert worst_case_retry_span(policy, 10.0) == 12 * 10 + sum(waits)
    huge = RetryPolicy(max_attempts=1_000_000, backoff_base_seconds=1, backoff_max_seconds=60)
    assert worst_case_retry_span(huge, 0.0) == sum(2.0 ** n for n in range(6)) + 60 * (
        999_999 - 6)
    assert worst_case_retry_span(RetryPolicy(max_attempts=5, backoff_base_seconds=0), 1) == 5
