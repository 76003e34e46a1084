"""Shard leases: each scheduler plans only the shards of jobs it holds a lease on.

Jobs carry a shard (a hash of their id). Every tick a scheduler announces itself, renews its
leases and, when below its fair share (shards / live schedulers, rounded up), takes up to that
share: free or expired shards first, then shards of schedulers above the share, down to it. So
a scheduler holds its share from its first pass on, and no shard is ever left unheld while a
live scheduler wants it: one that finds itself above its share keeps (and plans) the extra until
a scheduler below it takes the extra over. A crashed scheduler's shards are taken over once its
leases expire (``shard_lease_seconds``, short: seconds, not a job's run lease; renewed every
third of it); a stopped one gives its shards back at once. Leases save work; they do not make
anything correct (DESIGN rule 4): two planners planning one job, as the one a shard was taken
from does until its next pass, still insert each occurrence once and never move a job backwards.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from tickwork.clock import Clock
from tickwork.drivers.leases import ShardLeaseParams, ShardLeaseStore
from tickwork.scheduler.loop import Loop

log = logging.getLogger("tickwork.shards")


class ShardLeaser(Loop):
    name = "shards"

    def __init__(self, *, store: ShardLeaseStore, clock: Clock, owner: str | None = None,
                 lease_seconds: float = 5.0, interval_seconds: float | None = None,
                 on_gained: Callable[[], None] | None = None) -> None:
        """``on_gained``: told when a pass takes shards this scheduler did not hold (the
        planner's wake, so a dead scheduler's jobs are planned now, not at the next tick)."""
        interval = lease_seconds / 3 if interval_seconds is None else interval_seconds
        if not 0 < interval < lease_seconds:
            raise ValueError(f"interval_seconds ({interval}) must be greater than 0 and less "
                             f"than lease_seconds ({lease_seconds})")
        super().__init__(clock=clock, interval_seconds=interval)
        self.store = store
        self.owner = owner or f"scheduler-{uuid.uuid4().hex[:8]}"
        self.lease_seconds = lease_seconds
        self.on_gained = on_gained
        self.held: frozenset[int] = frozenset()
        self._valid_until: datetime | None = None

    def shards(self) -> frozenset[int]:
        """The shards to plan now: none once our leases may have lapsed (renewals failing)."""
        if self._valid_until is None or self.clock.now() >= self._valid_until:
            return frozenset()
        return self.held

    async def run_once(self, now: datetime) -> frozenset[int]:
        held = frozenset(await self.store.shard_lease_renew(
            ShardLeaseParams(owner=self.owner, now=now, lease_seconds=self.lease_seconds)))
        self._valid_until = now + timedelta(seconds=self.lease_seconds)
        gained = bool(held - self.held)
        if held != self.held:
            log.info("%s now holds %d shards (%s)", self.owner, len(held), _ranges(held))
        self.held = held
        if gained and self.on_gained is not None:
            self.on_gained()
        return held

    async def tick(self, now: datetime) -> bool:
        await self.run_once(now)
        return False

    async def stop(self) -> None:
        await super().stop()
        try:
            await self.store.shard_lease_release(self.owner)
        except Exception:  # the leases then expire on their own
            log.exception("could not release the shard leases of %s", self.owner)
        self.held = frozenset()
        self._valid_until = None


def _ranges(shards: frozenset[int]) -> str:
    """``0-9,12,40-42``: a short way to log a set of shards."""
    parts: list[str] = []
    for s in sorted(shards):
        if parts and parts[-1].split("-")[-1] == str(s - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{s}"
        else:
            parts.append(str(s))
    return ",".join(parts) or "none"
