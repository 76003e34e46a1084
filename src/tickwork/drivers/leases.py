"""The shard-lease seam: what a store offers schedulers that split the jobs by shard
(``scheduler/shards.py`` holds the loop; drivers that say ``shards`` implement this)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ShardLeaseParams:
    """Renew ``owner``'s leases to ``now + lease_seconds`` and take up to its fair share."""

    owner: str
    now: datetime
    lease_seconds: float


class ShardLeaseStore(Protocol):
    async def shard_lease_renew(self, p: ShardLeaseParams) -> list[int]:
        """The shards ``owner`` holds after this call, in order."""
        ...

    async def shard_lease_release(self, owner: str) -> None:
        """Give back every lease of ``owner`` (a graceful stop), so others take them at once."""
        ...
