"""The Lua scripts of ``scripts/*.lua``, registered on a client (EVALSHA, loaded on NOSCRIPT).

Each script states its KEYS/ARGV contract at its top.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files

from redis.commands.core import AsyncScript

from tickwork.drivers.redis.connect import RedisClient


def source(name: str) -> str:
    return (files("tickwork.drivers.redis") / "scripts" / f"{name}.lua").read_text("utf-8")


@dataclass(frozen=True, slots=True)
class Scripts:
    promote: AsyncScript
    read: AsyncScript
    retry: AsyncScript
    reclaim: AsyncScript
    dead: AsyncScript
    trim: AsyncScript
    stats: AsyncScript

    @classmethod
    def register(cls, client: RedisClient) -> Scripts:
        return cls(**{name: client.register_script(source(name)) for name in (
            "promote", "read", "retry", "reclaim", "dead", "trim", "stats")})
