"""``tickwork bench``, bounded: small workloads on real processes, judged on correctness only.

Each run asserts what the record says (nothing lost, duplicated or started early) and the
JSON shape; never speed, which only the full benchmark on a quiet machine measures.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio

from tickwork.bench import deploy, instructions
from tickwork.testing import postgres as pg
from tickwork.testing.faults import redisserver
from tickwork.testing.faults.redisserver import PrivateRedis
from tickwork.testing.processes import TICKWORK

pytestmark = [pytest.mark.bench, pytest.mark.slow]

private_redis = redisserver.private_redis

SHAPE = {"workload", "creation", "lateness_seconds", "expected", "executed", "lost",
         "duplicated", "early", "peak_memory", "deployment", "machine", "notes", "ok"}


async def bench(*args: str, timeout: float = 110) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        *TICKWORK, "bench", *args, "--json", "--quiet", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, err.decode()[-3000:] + out.decode()[-3000:]
    result: dict[str, Any] = json.loads(out)
    return result


def assert_correct(result: dict[str, Any], expected: int | None = None) -> None:
    assert set(result) >= SHAPE, sorted(SHAPE - set(result))
    assert result["lost"] == 0
    assert result["duplicated"] == 0
    assert result["early"] == 0
    assert result["ok"] is True
    if expected is not None:
        assert result["expected"] == result["executed"] == expected
    late = result["lateness_seconds"]
    assert set(late) == {"p50", "p99", "max"}
    assert 0 <= late["p50"] <= late["p99"] <= late["max"]


async def test_w1_on_sqlite(tmp_path: Path) -> None:
    result = await bench("w1", "--jobs", "2000", "--database", f"sqlite:///{tmp_path}/b.db")
    assert_correct(result, 2000)
    assert result["workload"] == "w1"
    assert result["deployment"]["kind"] == "sqlite"
    assert result["creation"]["jobs_per_second"] > 0
    assert result["throughput_per_second"] > 0
    assert result["peak_memory"]["service"]["processes"] == 1
    assert not (tmp_path / "b.db").exists()  # the bench's database is removed after the run


async def test_w1_with_a_global_limit_runs_everything_under_it(tmp_path: Path) -> None:
    result = await bench("w1", "--jobs", "300", "--global-limit", "4",
                         "--database", f"sqlite:///{tmp_path}/b.db")
    assert_correct(result, 300)
    assert result["parameters"]["global_limit"] == 4


async def test_w1_with_a_steady_stream_reports_it_apart(tmp_path: Path) -> None:
    result = await bench("w1", "--jobs", "1000", "--steady", "200", "--steady-seconds", "3",
                         "--database", f"sqlite:///{tmp_path}/b.db")
    assert_correct(result, 1000 + 600)
    steady = result["steady"]
    assert (steady["jobs"], steady["executed"]) == (600, 600)
    assert result["parameters"]["steady_rate"] == 200
    assert 0 <= steady["lateness_seconds"]["p50"] <= steady["lateness_seconds"]["max"]
    # due from T-1s at 200/s: some of it while the burst drained, and none counted twice
    assert 0 < steady["during_drain"]["jobs"] <= 600
    assert result["throughput_per_second"] > 0


async def test_w1_on_postgres(postgres_admin: str) -> None:
    result = await bench("w1", "--jobs", "2000", "--database", postgres_admin,
                         "--workers", "2")
    assert_correct(result, 2000)
    assert result["deployment"]["kind"] == "postgres"
    assert result["peak_memory"]["worker"]["processes"] == 2
    assert result["peak_memory"]["scheduler"]["processes"] == 1
    name = result["deployment"]["database"].rsplit("/", 1)[-1]
    assert name.startswith("tickwork_bench_")
    with pg._admin() as conn:  # dropped at the end
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    assert row is None


async def test_w3_recurring_on_sqlite() -> None:
    result = await bench("w3", "--jobs", "500", "--duration", "12")
    assert_correct(result)
    assert result["missed"] == 0
    assert result["expected"] > 500  # some jobs tick twice in 12 s (every 10 s)
    assert result["worst_ticks"]


async def test_w3_with_idle_jobs_reports_memory(postgres_admin: str) -> None:
    """Idle one-off jobs (due a day later) alongside the recurring load: created, never run,
    and the processes' memory reported at the window's start, its most and at the end."""
    result = await bench("w3", "--jobs", "200", "--duration", "5", "--idle-jobs", "2000",
                         "--database", postgres_admin, "--workers", "1")
    assert_correct(result)
    assert result["parameters"]["idle_jobs"] == 2000
    assert result["idle"]["jobs"] == 2000
    assert result["idle"]["due"] == "later"
    assert result["idle"]["jobs_per_second"] > 0
    assert "executed" not in result["idle"]  # due after the run: never planned
    assert result["expected"] == result["executed"] >= 60  # the ticks only: */5 s fire once
    for kind in ("scheduler", "worker"):
        rss = result["rss_mib"][kind]
        assert 0 < rss["window_start"] <= rss["window_max"]
        assert 0 < rss["end"] <= rss["window_max"] <= result["peak_memory"][kind]["max_mib"]


async def test_w3_with_idle_jobs_due_in_the_window() -> None:
    """``--idle-due window``: the one-offs are planned and run within the window, checked
    like the ticks."""
    result = await bench("w3", "--jobs", "100", "--duration", "5", "--idle-jobs", "2000",
                         "--idle-due", "window")
    assert_correct(result)
    assert result["idle"]["executed"] == 2000
    assert result["expected"] == result["executed"] > 2000
    late = result["idle"]["lateness_seconds"]
    assert 0 <= late["p50"] <= late["p99"] <= late["max"]
    assert result["rss_mib"]["service"]["end"] > 0


async def test_w2_small_profile_plots_lateness_and_table_sizes(tmp_path: Path) -> None:
    """A small profile with a spike minute and ``--retention``: the processes purge and prune
    within seconds, the tables are sampled, judged and plotted, and so is lateness; ~20 s."""
    plot, sizes = tmp_path / "w2.svg", tmp_path / "size.svg"
    result = await bench("w2", "--end-minute", "3", "--heavy-minutes", "1", "--spike", "300",
                         "--per-day", "100000", "--compression", "15", "--retention", "4s",
                         "--plot", str(plot), "--size-plot", str(sizes))
    assert_correct(result)
    assert [m["minute"] for m in result["per_minute"]] == [0, 1, 2]
    assert [m["spike"] for m in result["per_minute"]] == [False, True, False]
    assert result["per_minute"][1]["jobs"] == 300 + result["parameters"]["base_per_minute"]
    assert result["series"]
    assert {"t", "p50", "p99", "max"} <= set(result["series"][0])
    assert plot.read_text().startswith("<svg")
    t = result["tables"]
    assert (t["method"], t["retention_seconds"]) == ("dbstat", 4.0)
    assert t["retentions_passed"] >= 2
    assert t["series"][-1]["t"] >= 2 * 4.0
    assert set(t["series"][0]["rows"]) == {"jobs", "occurrences", "attempts"}
    # Every one-off job finished and was purged a retention later: far fewer rows at the
    # end than jobs run, the warm-up's included.
    assert t["series"][-1]["rows"]["jobs"] < result["executed"]
    assert set(t["verdict"]) == {"jobs", "occurrences", "attempts", "bounded"}
    text = sizes.read_text()
    assert text.startswith("<svg")
    assert "retention x2" in text


async def test_w2_retention_must_be_a_duration() -> None:
    proc = await asyncio.create_subprocess_exec(
        *TICKWORK, "bench", "w2", "--retention", "soon", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    assert err.decode().strip().splitlines() == [
        "tickwork: error: --retention: 'soon' is not a duration (use seconds or a duration "
        "like 90, 30s, 15m, 1h, 1d, 1h30m or 500ms)"]


async def test_w4_on_postgres_and_redis(postgres_admin: str, private_redis: PrivateRedis,
                                        tmp_path: Path) -> None:
    """A few hundred interval jobs for a short window: the record and the store's attempts
    agree that nothing was missed, duplicated or early; lateness is plotted."""
    plot = tmp_path / "w4.svg"
    result = await bench("w4", "--jobs", "300", "--every", "5", "--duration", "10",
                         "--database", postgres_admin, "--redis", private_redis.url,
                         "--workers", "1", "--plot", str(plot), timeout=150)
    assert plot.read_text().startswith("<svg")
    assert "W4: 300 jobs every 5s" in plot.read_text()
    assert_correct(result, 600)  # every job twice: 10 s of a 5 s interval
    assert result["workload"] == "w4"
    assert result["deployment"]["kind"] == "postgres+redis"
    assert result["parameters"] == {"jobs": 300, "every_seconds": 5.0, "duration_seconds": 10}
    assert result["ticks_per_second"] == 60.0
    assert 0 < result["executions_per_second"] <= 60.0
    store = result["store"]  # the independent count agrees with the record
    assert store == {"checked": True, "attempts": 600, "executed": 600, "missed": 0,
                     "duplicated": 0, "retried": 0}
    rss = result["rss_mib"]
    assert rss["series"]
    assert {"t", "scheduler", "worker"} <= set(rss["series"][0])
    for kind in ("scheduler", "worker"):
        assert 0 < rss[kind]["start"] <= rss[kind]["max"]
        assert isinstance(rss[kind]["flat"], bool)
    cpu = result["cpu"]
    assert cpu["ms_per_execution"]["worker"] > 0
    assert [k.split("-")[0] for k in cpu["ms_per_execution_by_process"]].count("worker") == 1


async def test_pgcost_counts_what_one_execution_writes(postgres_admin: str) -> None:
    """Rows per execution are counts the code decides (an occurrence inserted and updated
    twice, an attempt's row written once, when it ends, the job's next run moved once)."""
    result = await bench("pgcost", "--jobs", "100", "--every", "5", "--duration", "5",
                         "--database", postgres_admin, "--workers", "1", timeout=150)
    assert (result["expected"], result["executed"], result["lost"]) == (100, 100, 0)
    rows = result["per_execution"]["rows"]
    assert rows["occurrences"]["inserted"] == 1.0
    assert rows["occurrences"]["updated"] == 2.0
    assert rows["jobs"]["updated"] == 1.0
    (attempts,) = [v for k, v in rows.items() if k.startswith("attempts")]
    assert (attempts["inserted"], attempts["updated"]) == (1.0, 0.0)
    assert result["per_execution"]["wal_bytes"] > 0
    assert result["creation"]["per_job"]["rows"]["jobs"]["inserted"] == 1.0


def test_redis_is_passed_to_every_process(tmp_path: Path) -> None:
    d = deploy.Deployment(database=pg.DEFAULT_ADMIN_URL, workdir=tmp_path,
                          redis="redis://127.0.0.1:6379/0", schedulers=2, workers=3)
    d.url = "postgresql://postgres@127.0.0.1:5432/tickwork_bench_x"
    children = d.plan()
    assert [c.kind for c in children] == ["scheduler"] * 2 + ["worker"] * 3
    assert all(c.argv[-2:] == ["--redis", "redis://127.0.0.1:6379/0"] for c in children)


@pytest.fixture
def postgres_admin() -> str:
    """The server URL (the bench creates and drops a database of its own on it)."""
    try:
        with pg._admin():
            pass
    except Exception as exc:
        pg._unreachable(str(exc))
    return pg.admin_url()


def test_the_instruction_count_harness_counts_a_whole_drain() -> None:
    """``python -m tickwork.bench.instructions``: it exits 0 only once every job ran under
    callgrind, and prints the count and the count per execution."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        pytest.skip("valgrind is not installed")
    pg.require_server()
    jobs = 64
    done = subprocess.run(
        [sys.executable, "-m", "tickwork.bench.instructions", "--database", pg.admin_url(),
         "--jobs", str(jobs), "--warmup", "8", "--timeout", "90"],
        capture_output=True, text=True, timeout=115, check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    found = re.search(rf"([\d,]+) instructions for {jobs} executions: ([\d,]+) per execution "
                      r"\(after 8 warm-up runs", done.stdout)
    assert found is not None, done.stdout
    total, per = (int(n.replace(",", "")) for n in found.groups())
    assert per == round(total / jobs)
    assert per > 10_000  # claiming, running and recording a job is never free


async def test_the_instruction_count_harness_reads_through_redis(
        private_redis: PrivateRedis) -> None:
    """``--redis``: the worker reads every run from the stream the harness promoted it into,
    and the harness leaves no key of the worker's behind."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        pytest.skip("valgrind is not installed")
    pg.require_server()
    jobs = 64
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "tickwork.bench.instructions", "--database", pg.admin_url(),
         "--redis", private_redis.url, "--jobs", str(jobs), "--warmup", "8",
         "--timeout", "90"],
        capture_output=True, text=True, timeout=115, check=False)
    assert done.returncode == 0, done.stderr + done.stdout
    assert re.search(rf"instructions for {jobs} executions: [\d,]+ per execution",
                     done.stdout), done.stdout
    log = Path(done.stdout.rsplit("output: ", 1)[1].rstrip(")\n")) / "worker.log"
    assert "dispatch redis" in log.read_text()
    client = redis.asyncio.Redis.from_url(private_redis.url)
    try:
        assert await client.keys("*") == []
    finally:
        await client.aclose()


def test_the_instruction_count_is_read_from_callgrinds_last_report() -> None:
    log = "==1== Events    : Ir\n==1== Collected : 1,234\n==2== Collected : 5,678,901\n"
    assert instructions.collected(log) == 5_678_901
    assert instructions.collected("==1== no count here\n") is None
