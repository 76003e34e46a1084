"""A fixed piece of pure-Python work, timed: how fast this machine runs the interpreter.

Machines of one kind differ (a benchmark's figures moved by 1.9x from one two-core machine to
another with the same code), so every run reports this next to its figures; two runs compare
when their calibrations do. Best of several tries, single-threaded.
"""

from __future__ import annotations

import time


def _work() -> int:
    # What a worker does most: small dicts, string formatting, method calls, comparisons.
    total = 0
    for i in range(20_000):
        row = {"job_id": f"job-{i}", "attempt": i % 7, "state": "running"}
        key = f'{row["job_id"]}:{row["attempt"]}'
        if row["state"] == "running" and key.endswith("3"):
            total += len(key)
        total += sorted((i, 3, 1))[1]
    return total


def calibration_ms(tries: int = 7) -> float:
    """Milliseconds the fixed work takes at best (lower is faster)."""
    best = float("inf")
    for _ in range(tries):
        start = time.perf_counter()
        _work()
        best = min(best, time.perf_counter() - start)
    return round(best * 1000, 2)
