"""Hostile input gets a clean 4xx and leaves the store as it was; a paused queue is not claimed."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_api import DOC, Api, assert_problem, open_api

from tickwork.drivers.base import OccurrenceClaimParams
from tickwork.drivers.sqlite.store import SqliteStore
from tickwork.testing.harness import Harness


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    a, store = await open_api(tmp_path, max_body_bytes=1024 * 1024)
    yield a
    await a.http.aclose()
    await store.close()


def snapshot(tmp_path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every tickwork table except tokens (whose last use is noted)."""
    with sqlite3.connect(tmp_path / "api.db") as conn:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall())
                for t in ("jobs", "occurrences", "attempts", "queues")}


async def test_hostile_bodies_get_4xx_and_store_nothing(api: Api, tmp_path: Path) -> None:
    await api.post("/api/v1/jobs", json=DOC)
    before = snapshot(tmp_path)
    write = {**api.auth("write"), "Content-Type": "application/json"}

    huge = json.dumps({**DOC, "name": "huge", "payload": {"url": "https://example.org/",
                                                           "body": "x" * 10_000_000}})
    r = await api.http.post("/api/v1/jobs", content=huge.encode(), headers=write)
    assert "larger than the limit" in assert_problem(r, 413)["detail"]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b" " * 1_000_000

    r = await api.http.post("/api/v1/jobs", content=chunks(), headers=write)
    assert_problem(r, 413)

    nul_escaped = {**DOC, "name": "a\u0000b"}
    body = assert_problem(await api.post("/api/v1/jobs", json=nul_escaped), 422)
    assert body["errors"][0]["field"] == "name"
    raw_nul = json.dumps(DOC).replace("nightly", "night\x00ly").encode()
    assert_problem(await api.http.post("/api/v1/jobs", content=raw_nul, headers=write), 422)
    payload_nul = {**DOC, "name": "p", "payload": {"url": "https://example.org/", "body": {
        "k\u0000": 1}}}
    assert_problem(await api.post("/api/v1/jobs", json=payload_nul), 422)

    unknown = {**DOC, "name": "u", "colour": "red"}
    body = assert_problem(await api.post("/api/v1/jobs", json=unknown), 422)
    assert body["errors"] == [{"field": "", "message": "unknown field 'colour'"}]
    nested = {**DOC, "name": "n", "retry": {"max_attempt": 3}}
    body = assert_problem(await api.post("/api/v1/jobs", json=nested), 422)
    assert body["errors"][0]["field"] == "retry"
    patch = await api.patch("/api/v1/jobs/nightly", json={"colour": "red"})
    assert_problem(patch, 422)

    assert snapshot(tmp_path) == before


async def test_a_script_tag_name_is_refused(api: Api, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    r = await api.post("/api/v1/jobs", json={**DOC, "name": "<script>alert(1)</script>"})
    assert_problem(r, 422)
    assert snapshot(tmp_path) == before


# --- a paused queue is not claimed (the condition added to occurrence_candidates) -----------

async def test_paused_queue_is_not_claimed_or_waited_for(harness: Harness) -> None:
    h = harness
    # The harness's pool serves "default" only: this test claims "reports" by hand.
    await h.client.create_job({"name": "q", "schedule": {"every": "1s"}, "kind": "python",
                               "queue": "reports", "overlap": "allow_all",
                               "payload": {"callable": "tickwork.testing.jobs:nothing"}})
    await h.client.pause_queue("reports")
    await h.tick(3)
    now = h.clock.now()
    store: SqliteStore = h.store
    claim = OccurrenceClaimParams(queue="reports", worker="w9", limit=10, now=now)
    assert (await store.occurrence_claim(claim)).claims == []
    assert await store.occurrence_next_due("reports", now) is None
    (queue,) = await h.client.list_queues()
    assert (queue.name, queue.paused) == ("reports", True)
    assert queue.due >= 3

    await h.client.resume_queue("reports")
    assert await store.occurrence_next_due("reports", now) is not None
    assert len((await store.occurrence_claim(claim)).claims) == queue.due
