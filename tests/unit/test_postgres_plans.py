"""The plans of the hot questions of the PostgreSQL driver: each walks its index in order and
stops at its LIMIT, whatever the statistics say (empty tables, or a burst just analysed)."""

from __future__ import annotations

import re

import psycopg
import pytest

from tickwork.drivers.postgres import claims as pg_claims
from tickwork.drivers.postgres.connection import Q, fetch_all
from tickwork.drivers.postgres.store import PostgresStore
from tickwork.models import Overlap
from tickwork.testing.factories import NOW, add_job, add_occurrences, claim, seconds


def _rows_read(node: dict[str, object], relation: str) -> int:
    """Rows the plan's scans of ``relation`` returned, over all their loops."""
    own = 0
    if node.get("Relation Name") == relation:
        own = int(node["Actual Rows"]) * int(node["Actual Loops"])  # type: ignore[call-overload]
    return own + sum(_rows_read(child, relation)  # type: ignore[arg-type]
                     for child in node.get("Plans", []))  # type: ignore[attr-defined]


def _numbered(sql: str, casts: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """``sql`` with its named placeholders as $1, $2, ... (a name used twice keeps its
    number, with its cast from ``casts``) and the names in that order, for PREPARE."""
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}{(casts or {}).get(match[1], '')}"

    return re.sub(r"%\((\w+)\)[bs]", placeholder, sql), names


async def test_the_next_due_question_reads_a_row_per_priority_not_every_waiting_one(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    """Idle workers ask it at every wake-up; min(due_at) over the queue read every waiting
    occurrence (27 ms with a burst of 20,000 waiting). Its generic plan, made for an empty
    table, walks occurrences_due in order too: no sort, no sequential scan."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute("PREPARE probe(text, timestamptz) AS " + Q["occurrence_next_due"].replace(
            "%(queue)s", "$1").replace("%(hour)s", "$2"))
        generic = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN EXECUTE probe('default', '2030-01-01')").fetchall())
    assert "Sort" not in generic, generic
    assert "Seq Scan on occurrences" not in generic, generic
    assert "Index Scan using occurrences_due" in generic, generic
    for priority in (0, 5, 9):
        job = await add_job(postgres_store, f"p{priority}", priority=priority)
        await add_occurrences(postgres_store, job,
                              *(NOW + seconds(priority + i) for i in range(300)))
    assert await postgres_store.occurrence_next_due("default", NOW) == NOW
    with psycopg.connect(postgres_url) as conn:
        conn.execute("ANALYZE")
        plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + Q["occurrence_next_due"], {
            "queue": "default", "hour": NOW}).fetchone()[0][0]["Plan"]  # type: ignore[index]
        conn.rollback()
    # One descent per priority to find the levels, one row per level to answer.
    assert _rows_read(plan, "occurrences") <= 8, plan


@pytest.mark.parametrize(("sql", "walk"), [
    (Q["occurrence_candidates"], "Index Scan using occurrences_due"),
    (pg_claims._FRESH_CANDIDATES, "Index Scan Backward using occurrences_due")])
def test_claim_candidates_walk_the_due_index_and_find_each_job_by_its_key(
        postgres_url: str, sql: str, walk: str) -> None:
    """The oldest due, and a backlog's fresh share (the newest due of the top priority), in
    the order of occurrences_due, each job by its primary key: the LIMIT ends the walk. The
    generic plan made for an empty table once hashed every job and sorted every due row."""
    params = {"queue": "'default'", "now": "'2030-01-02'", "server_clock": "false",
              "limit": "16", "hour": "'2030-01-01'", "top": "0", "after": "'2030-01-01'"}
    text, names = _numbered(sql)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE probe AS {text}")  # type: ignore[arg-type]
        plan = "\n".join(r[0] for r in conn.execute(  # type: ignore[call-overload]
            f"EXPLAIN EXECUTE probe({', '.join(params[n] for n in names)})").fetchall())
    assert walk in plan, plan
    assert "Index Scan using jobs_pkey on jobs" in plan, plan
    assert "Sort" not in plan, plan
    assert "Hash" not in plan.split("LockRows")[1], plan


@pytest.mark.parametrize("generic", [False, True])
async def test_claim_candidates_stop_at_their_limit_once_a_burst_is_analysed(
        postgres_store: PostgresStore, postgres_url: str, generic: bool) -> None:
    """Statistics that know the burst (autovacuum analyses the table while it drains) must not
    turn the claim into a read of every due row: with the paused-queue check correlated to each
    row, the estimate fell to one row and the plan sorted all 2,000 (55 ms a claim at 6,400)."""
    job = await add_job(postgres_store, "burst")
    await add_occurrences(postgres_store, job, *(NOW + seconds(i / 100) for i in range(2000)))
    text, names = _numbered(Q["occurrence_candidates"])
    values = {"queue": "'default'", "now": "'2030-01-02'", "server_clock": "false",
              "limit": "81", "hour": "'2030-01-01'"}
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        if generic:
            conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE probe AS {text}")  # type: ignore[arg-type]
        plan = conn.execute(  # type: ignore[call-overload]
            "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE probe("
            f"{', '.join(values[n] for n in names)})").fetchone()[0][0]["Plan"]
    assert _rows_read(plan, "occurrences") <= 2 * 81, plan
    assert "Sort" not in str(plan), plan


@pytest.mark.parametrize("generic", [False, True])
def test_advancing_jobs_finds_each_by_its_key_not_by_hashing_them_all(
        postgres_url: str, generic: bool) -> None:
    """The planner advances 500 jobs at a time: joined on id, the plan read and hashed every
    job for every batch (O(jobs), 7 of 17 ms a batch with 20,000)."""
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        names.append(match[1])
        return f"${len(names)}"

    text = re.sub(r"%\((\w+)\)[bs]", placeholder, Q["job_advance"])
    values = {"ids": "ARRAY['a','b']", "expected": "ARRAY[NULL,NULL]::timestamptz[]",
              "next": "ARRAY[NULL,NULL]::timestamptz[]"}
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        if generic:
            conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE probe AS {text}")  # type: ignore[arg-type]
        plan = "\n".join(r[0] for r in conn.execute(  # type: ignore[call-overload]
            f"EXPLAIN EXECUTE probe({', '.join(values[n] for n in names)})").fetchall())
    assert "Seq Scan on jobs" not in plan, plan
    assert "Index Scan using jobs_pkey on jobs" in plan, plan
    assert "Hash" not in plan, plan


@pytest.mark.parametrize("statement", ["occurrence_complete", "occurrence_heartbeat",
                                       "occurrence_release"])
@pytest.mark.parametrize("generic", [False, True])
async def test_completions_find_each_run_by_its_key_not_among_all_running(
        postgres_store: PostgresStore, postgres_url: str, generic: bool, statement: str
) -> None:
    """A completion's fence (state running) named as a constant let the plan fetch every
    running row through a partial index of running rows, whose entries completions leave
    dead and bitmap scans never kill: a read that grew with every run since the last vacuum
    (93 us a run at 100,000). Heartbeats and releases fence the same way."""
    job = await add_job(postgres_store, "burst", overlap=Overlap.ALLOW_ALL)
    await add_occurrences(postgres_store, job, *(NOW + seconds(i / 100) for i in range(2000)))
    await claim(postgres_store, NOW + seconds(60), limit=500)
    casts = {"now": "::timestamptz", "extend": "::float8", "worker": "::text"}
    text, names = _numbered(Q[statement], casts)
    arrays = {"job_ids": "text", "scheduled": "timestamptz", "attempts": "integer",
              "states": "text", "due": "timestamptz", "terminal": "text",
              "last_errors": "text", "outcomes": "text", "started": "timestamptz",
              "ended": "timestamptz", "outputs": "text", "errors": "text",
              "queued": "timestamptz"}
    values = {name: f"ARRAY[]::{kind}[]" for name, kind in arrays.items()}
    values.update(now="'2030-01-01'", extend="30", worker="'w1'")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        if generic:
            conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE probe AS {text}")  # type: ignore[arg-type]
        plan = "\n".join(r[0] for r in conn.execute(  # type: ignore[call-overload]
            f"EXPLAIN EXECUTE probe({', '.join(values[n] for n in names)})").fetchall())
    update = plan.split("CTE recorded")[0].split("CTE undone")[0]
    assert "Seq Scan on occurrences" not in update, plan
    for every_running in ("occurrences_running", "occurrences_queue_running",
                          "occurrences_job_unfinished"):
        assert every_running not in update, plan


async def test_the_claim_updates_the_locked_rows_by_their_ctid_not_among_all_waiting(
        postgres_store: PostgresStore, postgres_url: str) -> None:
    """The claim's UPDATE takes the rows it locked by their ctid. It is planned for each
    claim (the driver does not prepare it), with the table as it is: a plan made once while
    few runs waited (statistics taken then) walked every waiting row of occurrences_due for
    each row handed over, its guard on the state named as constants, 50 s a claim with
    1,000,000 waiting; a generic plan made for a small table is a seq scan and a hash join."""
    job = await add_job(postgres_store, "burst", overlap=Overlap.ALLOW_ALL)
    await add_occurrences(postgres_store, job, NOW, NOW + seconds(1))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ANALYZE")  # statistics of a table where two runs wait
    await add_occurrences(postgres_store, job, *(NOW + seconds(2 + i / 100) for i in range(5000)))
    text, names = _numbered(Q["occurrence_claim"])
    at = [f"'{(NOW + seconds(2 + i / 100)).isoformat()}'" for i in range(256)]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        tids = [f"'{r[0]}'" for r in conn.execute(
            "SELECT ctid::text FROM occurrences ORDER BY scheduled_at DESC LIMIT 256")]
    values = {"tids": f"ARRAY[{', '.join(tids)}]",
              "leases": f"ARRAY[{', '.join(at)}]::timestamptz[]", "worker": "'w1'",
              "now": "'2030-01-01'::timestamptz"}
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_custom_plan")  # as an unprepared statement
        conn.execute(f"PREPARE probe AS {text}")  # type: ignore[arg-type]
        plan = "\n".join(r[0] for r in conn.execute(  # type: ignore[call-overload]
            f"EXPLAIN EXECUTE probe({', '.join(values[n] for n in names)})").fetchall())
    update = plan.split("CTE claimed")[-1]
    assert "Tid Scan on occurrences" in update, plan
    for every_waiting in ("occurrences_due", "Seq Scan on occurrences", "Hash"):
        assert every_waiting not in update, plan


async def test_the_driver_never_prepares_the_claim(postgres_store: PostgresStore) -> None:
    """Past psycopg's prepare threshold (five runs of a statement on a connection) the claim
    is still sent unprepared: planned for each claim, with the table as it is then."""
    job = await add_job(postgres_store, "often", overlap=Overlap.ALLOW_ALL)
    await add_occurrences(postgres_store, job, *(NOW + seconds(i) for i in range(8)))
    for i in range(8):
        assert len((await claim(postgres_store, NOW + seconds(i), limit=1)).claims) == 1
    async with postgres_store.pool.transaction() as conn:
        prepared = [r["statement"] for r in await fetch_all(
            conn, "SELECT statement FROM pg_prepared_statements")]
    assert any("Due occurrences of one queue" in s for s in prepared), prepared
    assert not any("claim's time" in s for s in prepared), prepared
