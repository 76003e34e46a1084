"""Fault suite, the database itself: PostgreSQL stopped in immediate mode (a crash: every
backend killed, WAL recovery at the next start) under a running scheduler and two workers, and
started again a few seconds later. Every process rides it out and reconnects by itself.

The server is the test's own (``tickwork.testing.faults.pgserver``): the shared one serves
every other test and is never stopped. CI-sized by default (a 5 s outage);
TICKWORK_FAULTS_FULL=1 keeps it down 30 s with more jobs.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from tickwork.models import rfc3339
from tickwork.testing.faults.classify import Execution, Fault, classify
from tickwork.testing.faults.pgserver import PrivatePostgres
from tickwork.testing.faults.run import FaultRun, full, next_second, until_then

OUTAGE = 30 if full() else 5  # seconds PostgreSQL stays down
TICKS = 12 if full() else 6  # jobs ticking every second
ONE_OFFS = 8 if full() else 4  # one-off jobs due while it is down
BEFORE = 3  # at most this many seconds of ticks before the fault (seeded)
AFTER = 4  # seconds of ticks after it is back
SLOTS = "default:16" if full() else "default:8"  # per worker: the backlog drains in seconds

pytestmark = [pytest.mark.faults, pytest.mark.timeout(OUTAGE + 90)]


@pytest.fixture
async def private_postgres(tmp_path: Path) -> AsyncIterator[PrivatePostgres]:
    server = PrivatePostgres(tmp_path)
    try:
        yield await server.start()
    finally:
        await server.close()


def test_an_outage_of_every_process_explains_only_what_was_in_flight_during_it() -> None:
    t = 1_900_000_000.0
    outage = Fault("PostgreSQL down", 0, t + 1, "every process", every_process=True,
                   until=t + 6)

    def ran(occ: str, attempt: int, started: float, ended: float, pid: int = 1) -> Execution:
        return Execution(occurrence=occ, attempt=attempt, pid=pid, worker=f"w{pid}",
                         started=started, ended=ended, outcome="ok", scheduled_at=t - 5)

    report = classify(dict.fromkeys("abcd", t - 5), [
        ran("a", 1, t + 0.5, t + 2), ran("a", 2, t + 7, t + 8, pid=2),  # cut off: explained
        ran("b", 1, t + 1.1, t + 1.5, pid=2), ran("b", 2, t + 9, t + 10),  # claimed just before
        ran("c", 1, t - 3, t - 2.9), ran("c", 2, t + 7, t + 8),  # long done before it
        ran("d", 1, t + 6.5, t + 7), ran("d", 2, t + 8, t + 9),  # after it
    ], faults=[outage])
    assert (report.explained, report.unexplained, report.in_flight) == (["a", "b"], ["c", "d"],
                                                                         2)
    assert report.recoveries[0].seconds == pytest.approx(3.0)  # from its end to b's re-run
    assert "every process" in report.render()


STORE_DOWN = r"tickwork.store: PostgreSQL database .* retrying until it answers"
STORE_BACK = r"tickwork.store: PostgreSQL database .* answers again, after"


def count(lines: list[str], pattern: str) -> int:
    return sum(bool(re.search(pattern, line)) for line in lines)


async def test_postgres_restarted_in_immediate_mode(
    tmp_path: Path, private_postgres: PrivatePostgres,
) -> None:
    server = private_postgres
    async with FaultRun(tmp_path, server.url, name="PostgreSQL restart (immediate)") as run:
        s1 = run.scheduler("s1")
        w1, w2 = run.worker("w1", SLOTS), run.worker("w2", SLOTS)
        await run.start(s1, w1, w2)
        t0 = next_second(after=2)
        fault_in = run.rng.uniform(1, BEFORE)  # the seeded moment, seconds after t0
        window = BEFORE + OUTAGE + AFTER
        schedule = {"cron": "* * * * * *", "start_at": rfc3339(t0),
                    "end_at": rfc3339(t0 + timedelta(seconds=window - 0.5))}
        ticks = [run.doc(f"tick-{i:02d}", schedule, sleep=run.rng.uniform(0.2, 0.9),
                         overlap="allow_all", timeout_seconds=2) for i in range(TICKS)]
        one_offs = [run.doc(f"once-{i}", {"at": rfc3339(t0 + timedelta(
            seconds=fault_in + (i + 0.5) * OUTAGE / ONE_OFFS))}) for i in range(ONE_OFFS)]
        jobs = await run.create(ticks + one_offs)
        run.expect(jobs, t0, t0 + timedelta(seconds=window))

        await run.pause(until_then(t0) + fault_in)
        down, up = await server.restart_immediate(OUTAGE)
        fault = run.record_outage(f"PostgreSQL stopped -m immediate for {OUTAGE}s", down, up)
        await run.settle(run.all_settled, within=window + 40)

        alive = {p.name: p.running for p in (s1, w1, w2)}
        assert alive == {"s1": True, "w1": True, "w2": True}, "every process rode it out"
        codes = await asyncio.gather(*(run.stop_cleanly(p) for p in (s1, w1, w2)))
        assert codes == [0, 0, 0]
        report = await run.check()

    executions = run.executions()
    first: dict[str, float] = {}
    for e in executions:
        first[e.occurrence] = min(first.get(e.occurrence, e.started), e.started)
    due_during = {e.occurrence for e in executions if down <= e.scheduled_at < up}
    back = min(e.started for e in executions if e.started > up)
    caught_up = max(first[o] for o in due_during)
    print(f"recovery: first execution {back - up:.2f}s after PostgreSQL was back; the "
          f"{len(due_during)} occurrences due while it was down all started "
          f"{caught_up - up:.2f}s after it was back")
    assert report.recoveries[0].fault == fault
    assert len(due_during) >= TICKS * (OUTAGE - 1) + ONE_OFFS, "the outage's ticks all ran"
    for p in (s1, w1, w2):
        # One warning when PostgreSQL went away and one line when it answered again: no
        # traceback, no error, no line per failed pass or connection attempt.
        assert (count(p.lines, STORE_DOWN), count(p.lines, STORE_BACK)) == (1, 1), p.tail(40)
        assert count(p.lines, r"Traceback| ERROR ") == 0, p.tail(40)
        warnings = [line for line in p.lines if " WARNING " in line
                    and not re.search(r"tickwork\.(rescuer|completer): (rescued|result of)",
                                      line)]
        assert len(warnings) == 1, "\n".join(warnings)
