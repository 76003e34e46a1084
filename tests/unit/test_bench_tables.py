"""The tables' sampler of ``tickwork bench w2 --retention``: what it reads on both drivers, when
it says a retention passed, the flatness verdict, and the settings the processes get."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from tickwork.bench import tables
from tickwork.bench.sizeplot import size_plot
from tickwork.bench.tables import TableSampler, flatness, open_reader
from tickwork.bench.w2 import retention_env
from tickwork.config import load_settings
from tickwork.drivers.base import Store
from tickwork.drivers.history import PartitionsEnsureParams
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.testing.factories import NOW, add_job, add_occurrences, claim, complete, completion


def sample(t: float, jobs: int, occurrences: int, attempts: int,
           per_row: int | None = 100) -> dict[str, Any]:
    rows = {"jobs": jobs, "occurrences": occurrences, "attempts": attempts}
    size = {k: None if per_row is None else v * per_row for k, v in rows.items()}
    return {"t": t, "rows": rows, "bytes": size}


# --- the verdict ---------------------------------------------------------------------------


def test_flat_when_the_last_third_stays_within_ten_percent_of_the_middle() -> None:
    # Filling up over the first third, then level with a little noise.
    series = [sample(t, min(t, 30) * 1000, min(t, 30) * 900, min(t, 30) * 800)
              for t in range(0, 91, 5)]
    series[-2] = sample(85, 32_500, 27_000, 24_000)  # +8 % jobs: within 10 %
    verdict = flatness(series)
    assert verdict["jobs"]["rows"] == {"middle_max": 30_000, "last_max": 32_500, "flat": True}
    assert verdict["jobs"]["bytes"]["flat"] is True
    assert all(verdict[t]["flat"] for t in tables.TABLES)
    assert verdict["bounded"] is True


def test_growing_tables_are_not_flat_and_tiny_ones_are() -> None:
    growing = [sample(t, t * 1000, 50, 10) for t in range(0, 91, 5)]
    verdict = flatness(growing)
    assert verdict["jobs"]["flat"] is False
    assert verdict["jobs"]["rows"]["last_max"] == 90_000  # middle third's max: 55,000
    # 10 rows to 50 is five times as many, but within the slack of a tiny table.
    assert verdict["occurrences"]["flat"] is True
    assert verdict["bounded"] is False
    assert flatness(growing, slack={"rows": 0, "bytes": 0})["attempts"]["flat"] is True


def test_no_verdict_without_a_sample_in_each_third_and_rows_only_without_bytes() -> None:
    assert flatness([sample(0, 1, 1, 1)])["jobs"] == {"flat": None}
    assert flatness([])["bounded"] is None
    pages = [sample(t, 100, 100, 100, per_row=None) for t in range(0, 31, 5)]
    verdict = flatness(pages)
    assert set(verdict["jobs"]) == {"flat", "rows"}
    assert verdict["bounded"] is True


# --- the sampler ---------------------------------------------------------------------------


class FakeReader:
    method = "fake"

    def __init__(self) -> None:
        self.rows = {"jobs": 0, "occurrences": 0, "attempts": 0}
        self.closed = False

    async def read(self) -> tables.Reading:
        return dict(self.rows), dict.fromkeys(tables.TABLES, 4096)

    async def close(self) -> None:
        self.closed = True


async def test_the_sampler_says_when_each_retention_has_passed() -> None:
    reader, said, now = FakeReader(), [], [100.0]
    sampler = TableSampler(reader, retention=60.0, every=3600.0, say=said.append,
                           now=lambda: now[0])
    await sampler.start()  # a first sample at once; the next an hour away
    for t, jobs in ((30, 500), (61, 900), (100, 950), (125, 940)):
        now[0] = 100.0 + t
        reader.rows["jobs"] = jobs
        await sampler.sample()
    assert said == [
        "retention passed 1x (60s): jobs 900 rows 0.0 MiB, occurrences 0 rows 0.0 MiB, "
        "attempts 0 rows 0.0 MiB",
        "retention passed 2x (120s): jobs 940 rows 0.0 MiB, occurrences 0 rows 0.0 MiB, "
        "attempts 0 rows 0.0 MiB"]
    result = await sampler.stop()
    assert reader.closed
    assert [s["t"] for s in result["series"]] == [0, 30, 61, 100, 125, 125]
    assert (result["retentions_passed"], result["samples"], result["method"]) == (2, 6, "fake")
    assert result["verdict"]["jobs"]["rows"] == {"middle_max": 900, "last_max": 950,
                                                 "flat": True}


async def history(store: Store) -> None:
    """Three jobs, each run once; the day's partition first (PostgreSQL)."""
    await store.history_partitions_ensure(PartitionsEnsureParams(now=NOW, days_ahead=1))
    for i in range(3):
        job = await add_job(store, f"j{i}")
        await add_occurrences(store, job, NOW)
    claims = (await claim(store, NOW, limit=5)).claims
    assert len(claims) == 3
    await complete(store, NOW, *[completion(c) for c in claims])


async def test_the_sqlite_reader_counts_rows_and_the_pages_of_each_table(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    store = SqliteStore(url)
    await store.migrate()
    try:
        await history(store)
        reader = await open_reader(url)
        assert reader.method == "dbstat"
        rows, size = await reader.read()
        assert rows == {"jobs": 3, "occurrences": 3, "attempts": 3}
        page = 4096
        assert all(size[t] is not None and size[t] >= page for t in tables.TABLES)
        assert size["database"] >= sum(size[t] or 0 for t in tables.TABLES)
        reader.method = "pages"  # as on a library without dbstat: the file's pages only
        rows, size = await reader.read()
        assert rows["attempts"] == 3
        assert [size[t] for t in tables.TABLES] == [None, None, None]
        assert size["database"]
        assert size["database"] > 0
        await reader.close()
    finally:
        await store.close()


async def test_the_postgres_reader_sums_the_partitions_of_attempts(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    await store.migrate()
    try:
        await history(store)
        reader = await open_reader(postgres_url)
        assert reader.method == "pg_total_relation_size"
        rows, size = await reader.read()
        await reader.close()
    finally:
        await store.close()
    assert rows == {"jobs": 3, "occurrences": 3, "attempts": 3}
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        parent, part, jobs = await (await conn.execute(
            "SELECT pg_total_relation_size('attempts'), "
            "pg_total_relation_size('attempts_p20300101'), "
            "pg_total_relation_size('jobs')")).fetchone()
    assert parent == 0 < part  # the rows live in the day's partition, none in the parent
    assert size["attempts"] is not None
    assert size["attempts"] >= part
    assert size["jobs"] == jobs
    assert size["database"]
    assert size["database"] > jobs


def test_the_processes_get_the_retention_as_settings() -> None:
    env = retention_env(180.0)
    settings = load_settings(env=env)
    assert settings.finished_job_retention_seconds == 180.0
    assert settings.retention_days * 86400 == 180.0
    assert settings.prune_interval_seconds == 45.0


def test_the_size_plot_marks_each_retention_and_draws_each_table() -> None:
    series = [sample(t, t * 10, t * 9, t * 8) for t in range(0, 131, 10)]
    svg = size_plot(series, title="W2 <tables>", retention=60.0)
    assert svg.startswith("<svg")
    assert "W2 &lt;tables&gt;" in svg
    assert svg.count("retention x1") == svg.count("retention x2") == 2  # both panels
    assert "retention x3" not in svg
    assert svg.count("<polyline") == 6  # three tables, bytes and rows
    pages = [sample(t, 1, 1, 1, per_row=None) | {"bytes": {"jobs": None, "occurrences": None,
                                                           "attempts": None, "database": 8192}}
             for t in range(0, 31, 10)]
    svg = size_plot(pages, title="pages", retention=None)
    assert svg.count("<polyline") == 4  # the database's bytes, the three tables' rows
    assert "retention x" not in svg
