"""Instructions one worker spends per execution, counted by callgrind: ``python -m
tickwork.bench.instructions --database postgresql://.../DB [--redis redis://...] [--jobs 2560]``.

A count, not a time: the same tree gives the same figure (within 0.2 %) whatever else the
machine is doing, so a change to the worker's hot path can be judged on a noisy machine, where
interleaved drains of W1 differ by 20 % from one run to the next. The figure is one worker
process's, on PostgreSQL, for one-off no-op jobs (W1's): CPython's and the C extensions'
instructions, not the kernel's.

What it does: makes the database ``tickwork_instructions`` on the server (dropped at the start and
the end), creates ``--jobs`` jobs, starts ``tickwork worker`` under ``valgrind --tool=callgrind``
with counting off, and once the worker says it runs, drains ``--warmup`` jobs (256: the
first runs import the job's module and fill the worker's caches, once per process, which a
count over a few thousand runs would spread over each), turns counting on, plans one due
occurrence of each of the ``--jobs``, waits until every one has succeeded, turns counting off
and stops the worker. Needs valgrind (``callgrind_control``) on the PATH; about 20 s for 2,560 jobs.

With ``--redis`` the worker reads its runs from Redis, as in the PostgreSQL + Redis deployment:
each planned occurrence is also added to the due set and promoted into its queue's stream
(here, not by a scheduler, so only the worker's own instructions are counted). The worker's
keys (the ``tickwork`` prefix) in that Redis database are deleted at the start and the end:
name a database nothing else uses, e.g. ``redis://127.0.0.1:6379/15``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tickwork.bench.jobs import payload
from tickwork.drivers.base import (
    JobCreateManyParams,
    JobCreateParams,
    NewOccurrence,
    OccurrenceInsertParams,
)
from tickwork.drivers.dispatch import DueAddParams, DuePromoteParams, due_item
from tickwork.models import Job, JobSpec, Overlap, RetryPolicy, ScheduleSpec
from tickwork.testing.factories import new_occurrence

DATABASE = "tickwork_instructions"
BATCH = 500
_COLLECTED = re.compile(r"Collected\s*:\s*([\d,]+)")


def collected(log: str) -> int | None:
    """The instruction count callgrind printed at exit, or None if it printed none."""
    found = _COLLECTED.findall(log)
    return int(found[-1].replace(",", "")) if found else None


def _spec(name: str, record: str) -> JobSpec:
    return JobSpec(name=name, schedule=ScheduleSpec(type="every", every_seconds=3600.0),
                   kind="python", payload=payload(record), retry=RetryPolicy(max_attempts=3),
                   overlap=Overlap.SKIP)


async def _create(server: str, jobs: int, record: str) -> tuple[str, list[Job]]:
    import psycopg  # noqa: PLC0415  (the postgres extra)

    from tickwork.drivers.postgres.store import PostgresStore  # noqa: PLC0415

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    url = server.rsplit("/", 1)[0] + f"/{DATABASE}"
    store = PostgresStore(url)
    try:
        await store.migrate()
        now = datetime.now(UTC)
        made: list[Job] = []
        for start in range(0, jobs, BATCH):
            made += await store.job_create_many(JobCreateManyParams(jobs=[
                JobCreateParams(spec=_spec(f"i{n}", record), next_run_at=None, now=now)
                for n in range(start, min(jobs, start + BATCH))]))
    finally:
        await store.close()
    return url, made


async def _plan_and_wait(url: str, jobs: list[Job], seconds: float,
                         redis: str | None = None, before: int = 0) -> bool:
    """Plan a due occurrence of each job (and deliver it through Redis, given ``redis``);
    True once all succeeded (``before`` more had already), False after ``seconds``."""
    import psycopg  # noqa: PLC0415

    from tickwork.drivers.postgres.store import PostgresStore  # noqa: PLC0415

    store = PostgresStore(url)
    try:
        now = datetime.now(UTC)
        for start in range(0, len(jobs), BATCH):
            planned = [new_occurrence(j, now - timedelta(seconds=1))
                       for j in jobs[start:start + BATCH]]
            await store.occurrence_insert(OccurrenceInsertParams(occurrences=planned, now=now))
            if redis is not None:
                await _deliver(redis, planned)
    finally:
        await store.close()
    deadline = time.monotonic() + seconds
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:  # a harness: it polls until the drain is over
            cur = await conn.execute(
                "SELECT count(*) FROM occurrences WHERE state = 'succeeded'")
            row = await cur.fetchone()
            if row is not None and row[0] >= before + len(jobs):
                return True
            await asyncio.sleep(0.2)
    return False


async def _deliver(redis: str, occurrences: list[NewOccurrence]) -> None:
    """Into the due set, then promoted into the queues' streams, as a scheduler would."""
    from tickwork.drivers.redis.dispatch import RedisDispatch  # noqa: PLC0415  (the redis extra)

    dispatch = RedisDispatch.from_url(redis)
    try:
        await dispatch.due_add(DueAddParams([due_item(o) for o in occurrences]))
        for queue in {o.queue for o in occurrences}:
            while (await dispatch.due_promote(DuePromoteParams(queue))).moved:
                pass
    finally:
        await dispatch.close()


async def _forget(redis: str) -> None:
    """Delete the worker's keys (the default prefix) in the database ``redis`` names."""
    from tickwork.drivers.redis.connect import delete_keys, open_client  # noqa: PLC0415
    from tickwork.drivers.redis.keys import Keyspace  # noqa: PLC0415

    client = open_client(redis)
    try:
        await delete_keys(client, Keyspace().patterns())
    finally:
        await client.aclose()


def _drop(server: str) -> None:
    import psycopg  # noqa: PLC0415

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')


def _wait_for_line(log: Path, text: str, proc: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the worker did not start; its log ({log}):\n{log.read_text()[-2000:]}")
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tickwork.bench.instructions",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", required=True,
                        help="postgresql://... of a server (its database is not touched)")
    parser.add_argument("--redis", default=None,
                        help="redis://.../DB: the worker reads from Redis; its keys in that "
                             "database are deleted at the start and the end")
    parser.add_argument("--jobs", type=int, default=2560)
    parser.add_argument("--warmup", type=int, default=256,
                        help="jobs run before counting starts (imports and caches made once "
                             "are left out of the count)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds the drain may take under valgrind")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    if args.warmup < 0:
        parser.error("--warmup must be 0 or more")
    work = Path(tempfile.mkdtemp(prefix="tickwork-instructions-"))
    if args.redis is not None:
        asyncio.run(_forget(args.redis))
    url, made = asyncio.run(_create(args.database, args.warmup + args.jobs, str(work)))
    warm, jobs = made[:args.warmup], made[args.warmup:]
    log = work / "worker.log"
    env = {**os.environ, "TICKWORK_PYTHON_ALLOWED_MODULES": "tickwork.bench"}
    command = ["tickwork.cli.main", "worker", "--database", url]
    if args.redis is not None:
        command += ["--redis", args.redis]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",  # noqa: S607  (the PATH's)
             f"--callgrind-out-file={work / 'callgrind.out'}", sys.executable, "-m", *command],
            stdout=out, stderr=out, env=env)
    try:
        _wait_for_line(log, "tickwork worker is running", proc, 300)
        if warm and not asyncio.run(_plan_and_wait(url, warm, args.timeout, args.redis)):
            sys.exit(f"the warm-up's {len(warm)} jobs did not all run; the worker's log: {log}")
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)],  # noqa: S607
                       check=True, capture_output=True)
        drained = asyncio.run(_plan_and_wait(url, jobs, args.timeout, args.redis,
                                             before=len(warm)))
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)],  # noqa: S607
                       check=True, capture_output=True)
    finally:
        proc.terminate()
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:  # said, and the database still dropped
            proc.kill()
            proc.wait()
            print(f"the worker outlived SIGTERM by 120 s and was killed; its log: {log}",
                  file=sys.stderr)
        _drop(args.database)
        if args.redis is not None:
            asyncio.run(_forget(args.redis))
    if not drained:
        print(f"not every job ran within {args.timeout:g}s; the worker's log: {log}",
              file=sys.stderr)
        return 1
    count = collected(log.read_text(errors="replace"))
    if count is None:
        print(f"callgrind printed no count; the log: {log}", file=sys.stderr)
        return 1
    print(f"{count:,} instructions for {args.jobs:,} executions: "
          f"{count / args.jobs:,.0f} per execution (after {len(warm):,} warm-up runs; worker "
          f"log and callgrind output: {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
