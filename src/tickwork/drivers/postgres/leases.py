"""Shard leases in ``shard_leases``: renew, take a fair share (stealing it if need be), release.

A scheduler below its fair share takes it itself, in its own pass: free or expired shards
first, then shards of owners above the fair share (down to it, never below). Nobody gives
shards back while it is alive: a shard given back would be planned by no one until the next
scheduler's pass, while a shard taken from a busier owner is planned at once by the taker (and
by the owner, too, until its next pass shows it holds fewer: a harmless overlap, DESIGN rule 4).
Every pass runs under one advisory lock, so each sees the others' passes whole.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import LiteralString

from tickwork.drivers.leases import ShardLeaseParams
from tickwork.drivers.postgres.connection import Conn, Pool, Q, fetch_all, fetch_one


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
            # All we still own, even above the fair share: a newcomer below it takes the
            # extra from us in its own pass; until then the extra is ours to plan.
            held = await _shards(conn, Q["shard_leases_renew"], args)
            for query in (Q["shard_leases_take"], Q["shard_leases_steal"]):
                if len(held) >= fair:
                    break
                held += await _shards(conn, query, {**args, "fair": fair,
                                                    "want": fair - len(held)})
        return sorted(held)

    async def shard_lease_release(self, owner: str) -> None:
        async with self.pool.transaction() as conn:
            await conn.execute(Q["shard_leases_release"], (owner,))
            await conn.execute(Q["scheduler_node_leave"], (owner,))
            await conn.execute(Q["shard_leases_announce"], (owner,))


async def _shards(conn: Conn, query: LiteralString, args: dict[str, object]) -> list[int]:
    return [r["shard"] for r in await fetch_all(conn, query, args)]
