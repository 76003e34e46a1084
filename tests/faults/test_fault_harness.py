"""The fault suite's harness judged on its own: a broken guarantee must fail the run.

Pure checks of the classifier and the failpoint grammar, and one real run whose expected
occurrences include one the product never schedules, which the harness must report lost.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from tickwork.document import parse_job_document
from tickwork.errors import ConfigError
from tickwork.models import rfc3339
from tickwork.testing.faults.classify import Execution, Fault, classify
from tickwork.testing.faults.run import FaultRun, expected_of, next_second
from tickwork.worker import failpoints

T = 1_900_000_000.0


def ex(occ: str, attempt: int, started: float, *, pid: int = 1, outcome: str | None = "ok",
       scheduled: float = T) -> Execution:
    return Execution(occurrence=occ, attempt=attempt, pid=pid, worker=f"w{pid}",
                     started=started, ended=None if outcome is None else started + 0.1,
                     outcome=outcome, scheduled_at=scheduled)


def test_a_lost_an_unexplained_duplicate_an_early_start_and_an_unexpected_key_fail() -> None:
    expected = {"a": T, "b": T, "c": T, "d": T + 10}
    report = classify(expected, [
        ex("a", 1, T + 0.1),
        ex("b", 1, T + 0.1), ex("b", 2, T + 0.5),  # no fault: unexplained
        ex("d", 1, T + 9.0, scheduled=T + 10),  # a second early
        ex("zzz", 1, T + 0.1),
    ], seed=42)
    assert report.lost == ["c"]
    assert report.unexplained == ["b"]
    assert report.early == ["d#1 (1.000s early)"]
    assert report.unexpected == ["zzz"]
    assert not report.passed
    problems = report.problems()
    assert [p.split(":")[0] for p in problems] == [
        "lost", "unexplained duplicates", "unexpected", "early"]
    assert "TICKWORK_FAULTS_SEED=42" in report.render()


def test_a_duplicate_is_explained_only_by_a_fault_of_its_process_and_a_higher_attempt() -> None:
    expected = {"a": T, "b": T, "c": T}
    kill = Fault("kill -9", pid=1, at=T + 1)
    report = classify(expected, [
        ex("a", 1, T + 0.5, outcome=None), ex("a", 2, T + 8, pid=2),  # cut off, then rerun
        ex("b", 1, T + 0.5, pid=3), ex("b", 2, T + 8, pid=2),  # pid 3 was never faulted
        ex("c", 1, T + 0.5, outcome=None), ex("c", 1, T + 8, pid=2),  # same attempt: charged?
    ], faults=[kill])
    assert report.explained == ["a"]
    assert report.unexplained == ["b", "c"]
    assert report.in_flight == 2
    assert report.recoveries[0].seconds == pytest.approx(7.0)


def test_lateness_after_a_fault_is_each_later_occurrences_first_start() -> None:
    kill = Fault("kill -9", pid=1, at=T + 1)
    report = classify({"a": T, "b": T + 2, "c": T + 3, "d": T + 9}, [
        ex("a", 1, T + 20),  # due before the fault: not its lateness
        ex("b", 1, T + 2.5, pid=2, outcome=None, scheduled=T + 2),  # its first start: 0.5 s
        ex("b", 2, T + 30, pid=2, scheduled=T + 2),  # a rerun, not lateness
        ex("c", 1, T + 6, pid=2, scheduled=T + 3),  # 3 s late
    ], faults=[kill])
    [recovery] = report.recoveries
    assert recovery.lateness == pytest.approx(3.0)
    assert "max lateness after it 3.00s" in recovery.how
    assert classify({"a": T}, [ex("a", 1, T)], faults=[kill]).recoveries[0].lateness is None


def test_a_sigterm_release_reruns_with_the_same_attempt_and_retries_are_not_duplicates() -> None:
    term = Fault("SIGTERM", pid=1, at=T + 1, releases=True)
    report = classify({"a": T, "r": T}, [
        ex("a", 1, T + 0.5, outcome=None), ex("a", 1, T + 2, pid=2),
        ex("r", 1, T + 0.1, pid=2, outcome="failed"), ex("r", 2, T + 1, pid=2),
    ], faults=[term])
    assert (report.explained, report.retried, report.passed) == (["a"], ["r"], True)


def test_more_explained_duplicates_than_in_flight_fail_and_states_account_for_the_rest() -> None:
    kill = Fault("kill -9", pid=1, at=T + 1)
    runs = [ex("a", 1, T + 0.5), ex("a", 2, T + 3, pid=2)]
    assert classify({"a": T}, runs, faults=[kill]).passed
    assert not classify({"a": T}, runs, faults=[kill], explained_budget=0).passed
    report = classify({"m": T, "p": T}, [ex("p", 1, T + 0.5, outcome=None)],
                      faults=[Fault("died", pid=1, at=T + 0.6)],
                      final_states={"m": "missed", "p": "crashed"})
    assert report.passed
    assert report.accounted == {"missed": ["m"], "crashed": ["p"]}
    assert not classify({"m": T}, [], final_states={"m": "running"}).passed


def test_failpoint_specs() -> None:
    assert failpoints.parse("after_execute=kill:0.2, after_commit=kill@3,after_ack=kill") == {
        "after_execute": failpoints.Failpoint("after_execute", "kill", 0.2, None),
        "after_commit": failpoints.Failpoint("after_commit", "kill", 1.0, 3),
        "after_ack": failpoints.Failpoint("after_ack", "kill", 1.0, None),
    }
    for bad in ("after_lunch=kill", "after_execute=explode", "after_execute=kill:2",
                "after_commit=kill@0", "after_commit"):
        with pytest.raises(ConfigError):
            failpoints.parse(bad)
    assert failpoints.active() == {}  # not configured in the test process: a no-op
    failpoints.failpoint("after_execute")


@pytest.mark.faults
@pytest.mark.timeout(60)
async def test_the_harness_flags_an_occurrence_that_is_never_scheduled(tmp_path: Path) -> None:
    async with FaultRun(tmp_path, f"sqlite:///{tmp_path}/tickwork.db",
                        name="a definition that promises more") as run:
        service = run.service("svc", "default:4")
        await run.start(service)
        t0 = next_second(after=1)
        schedule = {"cron": "* * * * * *", "start_at": rfc3339(t0),
                    "end_at": rfc3339(t0 + timedelta(seconds=2.5))}
        doc = run.doc("tick", schedule)
        [job] = await run.create([doc])
        run.expect([job], t0, t0 + timedelta(seconds=5))
        # What the test believes the definition is: one more second than the store was given.
        wider = parse_job_document({**doc, "schedule": {
            **schedule, "end_at": rfc3339(t0 + timedelta(seconds=3.5))}}).spec
        run.expected.update(expected_of([dataclasses.replace(job, spec=wider)], t0,
                                        t0 + timedelta(seconds=5)))
        await run.settle(lambda: run.all_done_but(1), within=20)
        assert await run.stop_cleanly(service) == 0
        report = await run.verdict()
    assert report.lost == [f"tick@{rfc3339(t0 + timedelta(seconds=3))}"]
    assert not report.passed
