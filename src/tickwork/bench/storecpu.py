"""PostgreSQL's CPU per run for claims and completions, on two schemas taken in turn:
``python -m tickwork.bench.storecpu --database postgresql://.../DB --other-src PATH [--runs N]``.

A comparison, not a speed: the machines these figures come from change speed from minute to
minute, so the two databases are driven in turn, one claim and its completion at a time, and
only their ratio means something. One database is migrated by this tree, the other by the
tree whose ``src`` directory ``--other-src`` names (a checkout of another commit:
``git worktree add /tmp/other REV``), each in a process of its own; both are then driven by
this tree's store (the statements are this tree's; the tables and indexes each tree's own).

Each database gets ``--runs`` one-off jobs and a due occurrence of each. Then, in turn, a claim
of up to 256 runs and their completion (succeeded), until both are drained; the CPU time of
the database's server processes is read from ``/proc`` around each step (the server must run
on this machine). Prints PostgreSQL's CPU per run for each schema and their ratio. The
databases ``tickwork_storecpu_this`` and ``tickwork_storecpu_other`` are dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from tickwork.bench.jobs import payload
from tickwork.drivers.base import (
    JobCreateManyParams,
    JobCreateParams,
    OccurrenceClaimParams,
    OccurrenceCompleteParams,
    OccurrenceInsertParams,
)
from tickwork.models import JobSpec, RetryPolicy, ScheduleSpec
from tickwork.outcomes import Success
from tickwork.testing.factories import new_occurrence
from tickwork.worker.outcomes import decide

if TYPE_CHECKING:
    from tickwork.drivers.postgres.store import PostgresStore

SIDES = ("this", "other")
BATCH = 256  # a worker's claim at its default concurrency
CREATE_BATCH = 5000
THIS_SRC = str(Path(__file__).resolve().parents[2])  # the src directory of this tree
_MIGRATE = ("import asyncio, sys; from tickwork.drivers.postgres.store import PostgresStore as S;"
            " asyncio.run(S(sys.argv[1]).migrate())")


def process_seconds(stat: str) -> float:
    """User plus system CPU seconds of one ``/proc/PID/stat`` line."""
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_seconds(server: str, database: str) -> float:
    """CPU seconds so far of the server processes connected to ``database``."""
    import psycopg  # noqa: PLC0415  (the postgres extra)

    with psycopg.connect(server, autocommit=True) as conn:
        pids = [r[0] for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,))]
    total = 0.0
    for pid in pids:
        try:
            total += process_seconds(Path(f"/proc/{pid}/stat").read_text())
        except OSError:  # it ended, or runs elsewhere
            continue
    return total


def _recreate(server: str, database: str, src: str) -> str:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{database}"')
    url = server.rsplit("/", 1)[0] + f"/{database}"
    env = {**os.environ, "PYTHONPATH": src}
    subprocess.run([sys.executable, "-c", _MIGRATE, url], env=env, check=True)
    return url


async def _fill(store: PostgresStore, runs: int) -> None:
    now = datetime.now(UTC)
    schedule, work = ScheduleSpec(type="at", at=now), payload(os.devnull)
    for start in range(0, runs, CREATE_BATCH):
        jobs = await store.job_create_many(JobCreateManyParams(jobs=[
            JobCreateParams(spec=JobSpec(name=f"storecpu-{n}", schedule=schedule, kind="python",
                                         payload=work, retry=RetryPolicy()),
                            next_run_at=None, now=now)
            for n in range(start, min(runs, start + CREATE_BATCH))]))
        for first in range(0, len(jobs), 500):
            await store.occurrence_insert(OccurrenceInsertParams(occurrences=[
                new_occurrence(j, now - timedelta(seconds=1)) for j in jobs[first:first + 500]],
                now=now))


async def _step(store: PostgresStore, rng: random.Random) -> int:
    """One claim of up to BATCH runs and their completion; how many ran."""
    now = datetime.now(UTC)
    claimed = (await store.occurrence_claim(OccurrenceClaimParams(
        queue="default", worker="storecpu", limit=BATCH, now=now, lease_seconds=30))).claims
    if claimed:
        await store.occurrence_complete(OccurrenceCompleteParams(completions=[
            decide(c, Success(), started_at=now, finished_at=now, rng=rng) for c in claimed],
            now=now))
    return len(claimed)


async def compare(server: str, other_src: str, runs: int) -> dict[str, tuple[int, float]]:
    """Runs done and server CPU seconds, per side."""
    from tickwork.drivers.postgres.store import PostgresStore  # noqa: PLC0415

    names = {side: f"tickwork_storecpu_{side}" for side in SIDES}
    stores = {}
    for side, src in zip(SIDES, (THIS_SRC, other_src), strict=True):
        stores[side] = PostgresStore(_recreate(server, names[side], src), max_pool_size=2)
    spent = dict.fromkeys(SIDES, 0.0)
    done = dict.fromkeys(SIDES, 0)
    rng = random.Random(1)  # noqa: S311  (completions' backoff jitter, unused: all succeed)
    try:
        for store in stores.values():
            await _fill(store, runs)
        moved = True
        while moved:
            moved = False
            for side, store in stores.items():
                before = server_seconds(server, names[side])
                n = await _step(store, rng)
                spent[side] += server_seconds(server, names[side]) - before
                done[side] += n
                moved = moved or n > 0
    finally:
        for store in stores.values():
            await store.close()
        import psycopg  # noqa: PLC0415

        with psycopg.connect(server, autocommit=True) as conn:
            for name in names.values():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return {side: (done[side], spent[side]) for side in SIDES}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tickwork.bench.storecpu",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", required=True,
                        help="postgresql://... of a server on this machine (its database is "
                             "not touched)")
    parser.add_argument("--other-src", required=True,
                        help="the src directory of another tree (a git worktree's)")
    parser.add_argument("--runs", type=int, default=20_000)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be 1 or more")
    if not (Path(args.other_src) / "tickwork").is_dir():
        parser.error(f"--other-src: no tickwork package in {args.other_src}")
    result = asyncio.run(compare(args.database, args.other_src, args.runs))
    ms = {side: 1000 * seconds / max(1, done) for side, (done, seconds) in result.items()}
    for side in SIDES:
        print(f"{side}: {result[side][0]:,} runs, PostgreSQL {ms[side]:.4f} ms of CPU per run")
    if ms["other"] > 0:
        print(f"this / other: {ms['this'] / ms['other']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
