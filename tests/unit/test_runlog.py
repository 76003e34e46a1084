"""The run log: failures as they happen with their error text (WARNING for a retry, ERROR for
dead), successes at DEBUG unless every run is asked for, and a summary of the counts."""

from __future__ import annotations

import logging

import pytest

from tickwork.testing.harness import Harness
from tickwork.worker.runlog import RunLog


def runs(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "tickwork.runs"]


async def create(h: Harness, name: str, payload: dict[str, object], attempts: int) -> None:
    await h.client.create_job({
        "name": name, "schedule": {"at": h.clock.now().isoformat()}, "kind": "python",
        "payload": payload, "retry": {"max_attempts": attempts}})


async def test_a_retry_is_a_warning_and_dead_an_error_with_the_error_text(
        harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    h = harness
    h.pool.run_log = RunLog(summary_seconds=0)
    caplog.set_level(logging.DEBUG, logger="tickwork.runs")
    await create(h, "flaky", {"callable": "tickwork.testing.jobs:boom", "args": ["kaput"]}, 2)
    await h.tick()
    await h.completed()
    await h.tick(3600)
    await h.completed()
    lines = runs(caplog)
    assert [level for level, _ in lines] == ["WARNING", "ERROR"], lines
    assert lines[0][1].startswith("flaky @ ")
    assert "attempt 1: failed" in lines[0][1]
    assert "; retrying at " in lines[0][1]
    assert "attempt 2: failed" in lines[1][1]
    assert lines[1][1].endswith("; dead")
    assert all("kaput" in text for _, text in lines), lines


async def test_success_is_debug_unless_each_run_is_logged(
        harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    h = harness
    caplog.set_level(logging.DEBUG, logger="tickwork.runs")
    for each, level in ((False, "DEBUG"), (True, "INFO")):
        caplog.clear()
        h.pool.run_log = RunLog(each=each, summary_seconds=0)
        await create(h, f"ok-{each}", {"callable": "tickwork.testing.jobs:nothing"}, 1)
        await h.tick()
        await h.completed()
        lines = runs(caplog)
        assert [lv for lv, _ in lines] == [level], lines
        assert "attempt 1: succeeded in " in lines[0][1]


def test_the_summary_counts_by_state_and_resets(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tickwork.runs")
    log = RunLog(summary_seconds=0)
    log.summarize()
    assert runs(caplog) == []  # nothing finished: nothing to say
    log.counts.update({"succeeded": 3, "dead": 1})
    log.close()
    assert runs(caplog) == [("INFO", "4 attempts finished since the last summary: "
                                     "1 dead, 3 succeeded")]
    assert not log.counts
