"""A private redis-server per test: ``tickwork.testing.faults.redisserver``, re-exported for
the tests that import it from here."""

from __future__ import annotations

from tickwork.testing.faults.redisserver import PrivateRedis, free_port

__all__ = ["PrivateRedis", "free_port"]
