"""Redis dispatch: a due sorted set and priority-band streams per queue (see docs/redis.md)."""

from __future__ import annotations

from tickwork.drivers.redis.dispatch import RedisDispatch, RedisHealth
from tickwork.drivers.redis.keys import Keyspace

__all__ = ["Keyspace", "RedisDispatch", "RedisHealth"]
