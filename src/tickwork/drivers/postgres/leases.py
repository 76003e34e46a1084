"""Shard leases in ``shard_leases``: renew, rebalance to a fair share, release."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import timedelta

from tickwork.drivers.postgres.connection import Conn, Pool, Q, fetch_all, fetch_one
from tickwork.scheduler.shards import ShardLeaseParams


class ShardLeaseMethods:
    pool: Pool

    shard_count: Callable[[], Awaitable[int]]  # provided by the store

    async def shard_lease_renew(self, p: ShardLeaseParams) -> list[int]:
        count = await self.shard_count()
        until = p.now + timedelta(seconds=p.lease_seconds)
        args = {"owner": p.owner, "now": p.now, "until": until, "count": count}
        async with self.pool.transaction() as conn:
            await conn.execute(Q["shard_lock"])
            await conn.execute(Q["scheduler_node_beat"], args)
            await conn.execute(Q["scheduler_nodes_forget"], args)
            row = await fetch_one(conn, Q["scheduler_nodes_live"], args)
            live = max(1, int(row["live"]) if row else 1)
            fair = math.ceil(count / live)
            held = sorted(r["shard"] for r in await fetch_all(conn, Q["shard_leases_renew"], args))
            if len(held) > fair:
                extra = held[fair:]
                await conn.execute(Q["shard_leases_give_back"], {**args, "shards": extra})
                held = held[:fair]
            elif len(held) < fair:
                held += await _take(conn, {**args, "want": fair - len(held)})
        return sorted(held)

    async def shard_lease_release(self, owner: str) -> None:
        async with self.pool.transaction() as conn:
            await conn.execute(Q["shard_leases_release"], (owner,))
            await conn.execute(Q["scheduler_node_leave"], (owner,))


async def _take(conn: Conn, args: dict[str, object]) -> list[int]:
    return [r["shard"] for r in await fetch_all(conn, Q["shard_leases_take"], args)]
