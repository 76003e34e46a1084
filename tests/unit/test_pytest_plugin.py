"""tickwork's pytest plugin (tickwork.pytest_plugin) from a user's point of view: a project
with jobs declared with @tickwork.job and tests that use tickwork_eager and tickwork_clock,
run by pytest in a process of its own, which finds the plugin through its entry point."""

from __future__ import annotations

import pytest

INI = "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
JOBS = '''
import tickwork
from tickwork.executors.base import ExecutionContext


@tickwork.job(cron="0 3 * * *", timezone="Europe/Berlin", name="nightly-report")
def nightly_report(ctx: ExecutionContext) -> str:
    return f"report {ctx.scheduled_at:%Y-%m-%d} attempt {ctx.attempt} key {ctx.idempotency_key}"


@tickwork.job(every="90s", args=[2, 3])
async def add(a: int, b: int) -> int:
    return a + b


@tickwork.job(every="1h")
def refuse() -> None:
    raise tickwork.Fail("no", retriable=False)
'''

USER_TESTS = '''
from datetime import datetime, timedelta, timezone

import pytest

import tickwork
from myapp.jobs import add, nightly_report, refuse

UTC = timezone.utc


def test_eager_runs_a_decorated_job_and_returns_its_result(tickwork_eager, tickwork_clock):
    assert tickwork_eager.run(add) == 5
    out = tickwork_eager.run(nightly_report, attempt=2)
    assert out == "report 2030-01-01 attempt 2 key nightly-report:2030-01-01T00:00:00Z"
    assert tickwork_eager.run("nightly-report").startswith("report 2030-01-01")
    assert tickwork_eager.run(nightly_report, scheduled_at="2030-06-01T01:00:00Z").startswith(
        "report 2030-06-01 attempt 1")


def test_eager_runs_a_job_document(tickwork_eager):
    doc = {"name": "adhoc", "schedule": {"every": "1m"}, "kind": "python",
           "payload": {"callable": "myapp.jobs:add", "args": [40, 2]}}
    assert tickwork_eager.run(doc) == 42


def test_eager_lets_outcomes_raise(tickwork_eager):
    with pytest.raises(tickwork.Fail, match="no"):
        tickwork_eager.run(refuse)


async def test_eager_from_async_code(tickwork_eager):
    assert await tickwork_eager.run_async(add) == 5


def test_the_clock_tells_what_fired(tickwork_clock):
    assert tickwork_clock.now() == datetime(2030, 1, 1, tzinfo=UTC)
    tickwork_clock.advance(timedelta(days=2))
    # 03:00 in Berlin is 02:00 UTC in winter
    assert tickwork_clock.fired(nightly_report) == [datetime(2030, 1, 1, 2, tzinfo=UTC),
                                                    datetime(2030, 1, 2, 2, tzinfo=UTC)]
    tickwork_clock.advance(180)
    assert len(tickwork_clock.fired(add)) == 2
    assert tickwork_clock.fired(nightly_report) == []
    start = datetime(2030, 1, 1, tzinfo=UTC)
    assert len(tickwork_clock.fired_between(add, start, start + timedelta(hours=1))) == 40
    assert tickwork_clock.next_fire("nightly-report") == datetime(2030, 1, 3, 2, tzinfo=UTC)


@pytest.mark.tickwork_clock("2030-03-30T12:00:00Z")
def test_the_clock_starts_where_the_marker_says(tickwork_clock, tickwork_eager):
    tickwork_clock.advance(timedelta(days=1))
    # the night Berlin moves to summer time: 03:00 local is now 01:00 UTC
    assert tickwork_clock.fired(nightly_report) == [datetime(2030, 3, 31, 1, tzinfo=UTC)]
    assert tickwork_eager.run(nightly_report).startswith("report 2030-03-31")
'''


def test_a_users_tests_use_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.mkpydir("myapp")
    pytester.path.joinpath("myapp", "jobs.py").write_text(JOBS, encoding="utf-8")
    pytester.makepyfile(test_myapp=USER_TESTS)
    pytester.makeini(INI)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-W", "error", "--strict-markers")
    result.assert_outcomes(passed=6)


def test_an_unknown_job_and_a_non_python_job_say_why(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_errors='''
import pytest

def plain():
    return 1

def test_errors(tickwork_eager, tickwork_clock):
    with pytest.raises(LookupError, match="not declared with @tickwork.job"):
        tickwork_eager.run(plain)
    with pytest.raises(LookupError, match="no job named 'nope'"):
        tickwork_clock.fired("nope")
    http = {"name": "h", "schedule": {"every": "1m"}, "kind": "http",
            "payload": {"url": "https://example.org/"}}
    with pytest.raises(TypeError, match="eager runs are for python jobs"):
        tickwork_eager.run(http)
    assert len(tickwork_clock.fired_between(http, tickwork_clock.now(),
                                            tickwork_clock.now().replace(hour=1))) == 60
''')
    pytester.makeini(INI)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-W", "error")
    result.assert_outcomes(passed=1)
