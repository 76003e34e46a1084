"""What the PostgreSQL driver does beyond the conformance suite: its schema, migrations, bulk
creation, transactional enqueue, concurrent claims of overlap jobs, errors, wake-ups."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from tickwork.client import AsyncClient, first_run
from tickwork.client.enqueue import create_job_in
from tickwork.clock import FakeClock
from tickwork.config import Settings
from tickwork.document import parse_job_document
from tickwork.drivers.base import (
    JobCreateManyParams,
    JobDueParams,
    JobListParams,
    OccurrenceListParams,
)
from tickwork.drivers.postgres.connection import Pool, Q
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.errors import Conflict, StoreError, StoreUnavailable, ValidationError
from tickwork.models import OccurrenceState, Overlap
from tickwork.runtime.embedded import EmbeddedService
from tickwork.testing import postgres as pg
from tickwork.testing.factories import (
    NOW,
    add_job,
    add_occurrences,
    claim,
    create_params,
    job_spec,
    seconds,
)

SCHEMA_FILE = (Path(__file__).resolve().parents[2] / "src" / "tickwork" / "drivers"
               / "postgres" / "schema.txt")
DOC = {"name": "receipt", "schedule": {"at": "2030-01-01T00:00:10Z"}, "kind": "http",
       "payload": {"url": "https://example.org/hook"}}


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    s = PostgresStore(postgres_url)
    yield s
    await s.close()


async def test_migrations_build_the_declared_schema(postgres_url: str) -> None:
    """The migrated template equals schema.txt; TICKWORK_TEST_UPDATE_SCHEMA=1 rewrites it."""
    actual = await pg.describe_schema(postgres_url)
    if os.environ.get("TICKWORK_TEST_UPDATE_SCHEMA") == "1":
        SCHEMA_FILE.write_text(actual, encoding="utf-8")
    assert actual == SCHEMA_FILE.read_text(encoding="utf-8")


async def test_concurrent_migrators_are_safe(postgres_template: str) -> None:
    name = pg.create_database()  # empty: nothing migrated yet
    try:
        url = pg.url_of(name)
        stores = [PostgresStore(url) for _ in range(4)]
        await asyncio.gather(*(s.migrate() for s in stores))
        for s in stores:
            await s.close()
        assert await pg.describe_schema(url) == SCHEMA_FILE.read_text(encoding="utf-8")
    finally:
        pg.drop_database(name)


async def test_bulk_create_is_one_copy(store: PostgresStore) -> None:
    jobs = await store.job_create_many(JobCreateManyParams(jobs=[
        create_params(job_spec(f"bulk-{i:05d}"), next_run_at=NOW) for i in range(20_000)]))
    assert len({j.id for j in jobs}) == 20_000
    assert {j.shard for j in jobs} == set(range(64))  # spread over every shard
    page = await store.job_list(JobListParams(after_name="bulk-19997"))
    assert page == jobs[-2:]
    with pytest.raises(Conflict, match="bulk-00007"):
        await store.job_create_many(JobCreateManyParams(jobs=[
            create_params(job_spec("fresh")), create_params(job_spec("bulk-00007"))]))


async def test_bulk_create_checks_each_document_while_it_copies(store: PostgresStore) -> None:
    client = AsyncClient(store, clock=FakeClock(NOW))
    schedules = [{"at": "2030-01-01T00:00:10Z"}, {"cron": "*/5 * * * * *"},
                 {"every": "10s", "offset": 3}]
    docs = [{**DOC, "name": f"doc-{i:04d}", "schedule": schedules[i % 3]} for i in range(1500)]
    late_mistake = [*docs[:1200], {**docs[1200], "schedule": {"cron": "61 * * * *"}}]
    with pytest.raises(ValidationError) as err:  # after two chunks were sent to the server
        await client.create_jobs(late_mistake)
    assert err.value.field == "[1200].schedule.cron"
    with pytest.raises(Conflict, match="doc-0001"):  # twice in the batch, chunks apart
        await client.create_jobs([*docs[:1200], docs[1]])
    assert await store.job_list(JobListParams()) == []
    created = await client.create_jobs(docs)
    assert [j.spec.name for j in created] == [d["name"] for d in docs]
    for job, doc in zip(created[:3], docs, strict=False):
        spec = parse_job_document(doc).spec
        assert (job.spec, job.next_run_at) == (spec, first_run(spec, NOW))
        assert await store.job_get(job.id) == job
    assert await store.job_get("doc-1499") == created[-1]
    with pytest.raises(Conflict, match="doc-1499"):
        await client.create_jobs([{**DOC, "name": "new"}, docs[-1]])


async def test_transactional_enqueue_commits_with_the_transaction(
    store: PostgresStore, postgres_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn, conn.transaction():
        job = await create_job_in(conn, DOC, now=NOW)
        with pytest.raises(Conflict, match="receipt"):
            await create_job_in(conn, DOC, now=NOW)  # a savepoint: the outer one goes on
        assert [j.id for j in await store.job_list(JobListParams())] == []  # not yet
    assert await store.job_get("receipt") == job
    assert job.next_run_at == datetime(2030, 1, 1, 0, 0, 10, tzinfo=UTC)
    due = await store.job_due(JobDueParams(until=NOW + seconds(10)))
    assert [j.id for j in due] == [job.id]


async def test_transactional_enqueue_rolls_back_with_the_transaction(
    store: PostgresStore, postgres_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        await create_job_in(conn, {**DOC, "name": "kept-out"}, now=NOW)
        await conn.rollback()
        async with conn.transaction():
            await create_job_in(conn, {**DOC, "name": "kept"}, now=NOW)
    assert [j.spec.name for j in await store.job_list(JobListParams())] == ["kept"]


@pytest.mark.parametrize("overlap", [Overlap.SKIP, Overlap.BUFFER_ONE, Overlap.CANCEL_PREVIOUS])
async def test_concurrent_claimers_never_both_start_one_job(
    store: PostgresStore, postgres_url: str, overlap: Overlap
) -> None:
    """Six claimers at once, each job with several due occurrences: at most one runs, and once
    the claimers stop making progress, every job has one running."""
    await store.migrate()
    jobs = [await add_job(store, f"j{i}", overlap=overlap) for i in range(20)]
    for job in jobs:
        await add_occurrences(store, job, *(NOW - seconds(s) for s in range(5)))
    peers = [PostgresStore(postgres_url) for _ in range(6)]
    try:
        # A claimer skips a job another one holds (try-lock), and cancel_previous claims more
        # than once per job, so a fixed number of rounds may leave a job for the next round.
        for _ in range(20):
            rounds = await asyncio.gather(*(claim(p, NOW, worker=f"w{i}", limit=7)
                                            for i, p in enumerate(peers)))
            if not any(r.claims for r in rounds):
                break
    finally:
        for p in peers:
            await p.close()
    running = await store.occurrence_list(OccurrenceListParams(
        states=[OccurrenceState.RUNNING], limit=1000))
    per_job = [o.job_id for o in running]
    assert sorted(per_job) == sorted(set(per_job)), "a job has two running occurrences"
    assert len(per_job) == 20


async def test_errors_are_translated(postgres_url: str) -> None:
    gone = PostgresStore("postgresql://postgres:secret@127.0.0.1:1/nowhere")
    gone.pool._connect_timeout = 2
    with pytest.raises(StoreUnavailable) as info:
        await gone.job_get("x")
    assert "secret" not in str(info.value)
    assert not isinstance(info.value, psycopg.Error)
    await gone.close()
    bare_name = pg.create_database()  # never migrated
    bare = PostgresStore(pg.url_of(bare_name))
    try:
        with pytest.raises(StoreError, match="jobs"):
            await bare.job_get("x")
    finally:
        await bare.close()
        pg.drop_database(bare_name)


@pytest.mark.parametrize("driver", ["sqlite", "postgres"])
async def test_job_due_shard_filter(driver: str, postgres_url: str, tmp_path: Path) -> None:
    s: SqliteStore | PostgresStore = (
        SqliteStore(f"sqlite:///{tmp_path}/t.db") if driver == "sqlite"
        else PostgresStore(postgres_url))
    try:
        await s.migrate()
        job = await add_job(s, "a", next_run_at=NOW)
        until = NOW + timedelta(seconds=1)
        assert [j.id for j in await s.job_due(JobDueParams(until=until))] == [job.id]
        mine = frozenset({job.shard})
        assert [j.id for j in await s.job_due(JobDueParams(until=until, shards=mine))] == [
            job.id]
        others = frozenset(range(4096)) - mine
        assert await s.job_due(JobDueParams(until=until, shards=others)) == []
        assert await s.job_due(JobDueParams(until=until, shards=frozenset())) == []
    finally:
        await s.close()


async def test_the_service_never_logs_the_database_password(
        postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    url = postgres_url.replace("://postgres@", "://postgres:s3cret-pw@", 1)
    assert "s3cret-pw" in url  # trust auth: any password is accepted
    service = EmbeddedService(Settings(database=url, api_enabled=False))
    with caplog.at_level(logging.INFO):
        await service.start()
        await service.stop()
    assert "tickwork is running: database postgresql://postgres:***@" in caplog.text
    assert "s3cret-pw" not in caplog.text


def _removed_by_filters(node: dict[str, object]) -> int:
    """Rows a plan node and its children read only to throw away."""
    own = sum(int(node.get(k, 0)) for k in  # type: ignore[call-overload]
              ("Rows Removed by Filter", "Rows Removed by Join Filter"))
    return own + sum(_removed_by_filters(child)  # type: ignore[arg-type]
                     for child in node.get("Plans", []))  # type: ignore[attr-defined]


async def test_a_key_claim_finds_each_row_by_its_whole_key(
        store: PostgresStore, postgres_url: str) -> None:
    """A recurring job has thousands of occurrences: claiming one of its keys must not read
    the others (it once matched on job_id and filtered on scheduled_at)."""
    jobs = [await add_job(store, f"ticks-{n}") for n in range(64)]
    for job in jobs:
        await add_occurrences(store, job, *(NOW + seconds(i) for i in range(100)))
    with psycopg.connect(postgres_url) as conn:
        conn.execute("ANALYZE")
        for name in ("occurrence_keys_lock", "occurrence_keys_peek"):
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + Q[name], {
                "job_ids": [j.id for j in jobs], "scheduled": [NOW + seconds(50)] * 64,
                "server_clock": True}).fetchone()[0][0]["Plan"]  # type: ignore[index]
            assert _removed_by_filters(plan) == 0, (name, plan)
        conn.rollback()


async def test_a_single_statement_runs_without_a_transaction_and_leaves_none_behind(
        postgres_url: str) -> None:
    pool = Pool(postgres_url, max_size=1)  # one connection: both blocks get the same one
    try:
        async with pool.statement() as conn:
            await conn.execute("CREATE TEMP TABLE s (x int)")
            # Committed already: no transaction stays open, waiting for a COMMIT.
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        async with pool.transaction() as conn:
            assert not conn.autocommit
            await conn.execute("CREATE TEMP TABLE t (x int)")
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    finally:
        await pool.close()


BY_KEY = r"Index Scan using occurrences_(pkey|scheduled)"  # (scheduled_at, job_id) may serve


@pytest.mark.parametrize(("name", "index"), [
    ("occurrence_keys_lock", BY_KEY), ("occurrence_keys_peek", BY_KEY),
    ("occurrence_claim", r"Tid Scan on occurrences(?s:.*)Tid Scan on occurrences"),
    ("occurrence_unfinished_of_jobs", r"Index Scan using occurrences_job_unfinished"),
    ("alert_jobs", r"Index Scan using jobs_alerting"),
    ("job_due", r"Index Scan using jobs_due on jobs(?s:.*)Index Scan using jobs_due_once")])
async def test_hot_reads_use_their_index_even_in_a_plan_made_for_an_empty_table(
        postgres_url: str, name: str, index: str) -> None:
    """Prepared statements keep the generic plan made on first use; on a new database that
    was a hash join over a scan of every occurrence (or of every waiting one, through
    occurrences_due, or every running one), kept as the table grew. The alert evaluator's
    read of the jobs naming alerts has an index of exactly those, and the planner's two
    walks (every job due, the one-off ones due within the longer horizon) one each. The claim
    takes each row it locked by its ctid: a TID scan to find it, and one to update it."""
    values = {"job_ids": "'{j}'", "scheduled": "'{2030-01-01}'", "server_clock": "true",
              "tids": """'{"(0,1)"}'""",
              "leases": "'{2030-01-01}'", "worker": "'w'", "now": "'2030-01-01'",
              "after": "''", "limit": "100", "shards": "NULL", "until": "'2030-01-01'",
              "until_once": "'2030-01-02'"}
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        names.append(match[1])
        return f"${len(names)}"

    sql = re.sub(r"%\((\w+)\)[bs]", placeholder, Q[name])
    args = ", ".join(values[n] for n in names)
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute(f"PREPARE probe AS {sql}")  # type: ignore[arg-type]
        cur = await conn.execute(f"EXPLAIN EXECUTE probe({args})")  # type: ignore[arg-type]
        plan = "\n".join(row[0] for row in await cur.fetchall())
    assert "Seq Scan on occurrences" not in plan, plan
    assert name != "job_due" or "Seq Scan on jobs" not in plan, plan
    assert "occurrences_due" not in plan, plan
    assert re.search(index, plan), plan
