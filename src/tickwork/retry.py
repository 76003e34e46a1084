"""Backoff between attempts (DESIGN G5): exponential, capped, with jitter. Pure code.

Attempts are numbered from 1. After attempt ``n`` fails, the ceiling of the wait before
attempt ``n + 1`` is ``min(backoff_max_seconds, backoff_base_seconds * 2 ** (n - 1))``:

- ``full`` (the default): a uniform draw from ``[0, ceiling]``, which spreads a crowd of
  retries the most (the AWS "exponential backoff and jitter" result);
- ``equal``: half the ceiling plus a uniform draw from ``[0, ceiling / 2]``;
- ``none``: the ceiling itself.
"""

from __future__ import annotations

import random

from tickwork.models import RetryPolicy

__all__ = ["backoff_ceiling", "backoff_delay", "worst_case_retry_span"]

# 2.0 ** 1024 overflows a float; any base * 2 ** 1000 is far beyond any sensible cap anyway.
_MAX_DOUBLINGS = 1000


def backoff_ceiling(policy: RetryPolicy, attempt: int) -> float:
    """The longest wait after attempt ``attempt`` (1-based) failed, before any jitter."""
    if attempt < 1:
        raise ValueError(f"attempt numbers start at 1, got {attempt}")
    doublings = min(attempt - 1, _MAX_DOUBLINGS)
    return min(policy.backoff_max_seconds, policy.backoff_base_seconds * 2.0 ** doublings)


def backoff_delay(policy: RetryPolicy, attempt: int, rng: random.Random) -> float:
    """Seconds to wait before attempt ``attempt + 1``, after attempt ``attempt`` failed."""
    ceiling = backoff_ceiling(policy, attempt)
    if policy.jitter == "full":
        return rng.uniform(0.0, ceiling)
    if policy.jitter == "equal":
        return ceiling / 2 + rng.uniform(0.0, ceiling / 2)
    if policy.jitter == "none":
        return ceiling
    raise ValueError(f"unknown jitter mode {policy.jitter!r} (expected full, equal or none)")


def worst_case_retry_span(policy: RetryPolicy, timeout_seconds: float) -> float:
    """Seconds from the first start to the last end if every attempt runs to its timeout
    and every backoff waits its full ceiling: what to compare with a recurring job's interval.
    """
    attempts = max(policy.max_attempts, 1)
    waits = 0.0
    for n in range(1, attempts):
        ceiling = backoff_ceiling(policy, n)
        if ceiling >= policy.backoff_max_seconds or ceiling <= 0:
            waits += ceiling * (attempts - n)  # every later wait is the same
            break
        waits += ceiling
    return attempts * timeout_seconds + waits
