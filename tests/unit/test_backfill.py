"""Backfills end to end: the preview (dry run), the overlap choice, and the runs it makes, on
SQLite (the harness), PostgreSQL (a worker woken by NOTIFY) and PostgreSQL + Redis (the
backfilled runs go through the due set). The store side of the overlap choice is in the
conformance suite (tickwork.testing.conformance.store_backfill)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_postgres_worker import Worker, worker  # noqa: F401  (the fixture)
from test_redis_worker import Stack, stack  # noqa: F401  (the fixture)

from tickwork.api import create_app
from tickwork.errors import ValidationError
from tickwork.models import OccurrenceState, Overlap, Trigger
from tickwork.testing import ledger
from tickwork.testing.harness import Harness

S = OccurrenceState
HOUR = timedelta(hours=1)


def hourly(name: str, path: Path, overlap: str = "skip") -> dict[str, Any]:
    """A python job on the hour that appends to the ledger."""
    return {"name": name, "schedule": {"cron": "0 * * * *"}, "kind": "python",
            "overlap": overlap,
            "payload": {"callable": "tickwork.testing.ledger:record",
                        "kwargs": {"path": str(path)}}}


def last_hours(now: datetime, n: int) -> tuple[datetime, datetime]:
    """A range holding the ``n`` whole hours before ``now``."""
    end = now.replace(minute=0, second=0, microsecond=0)
    return end - n * HOUR, end


async def test_a_preview_creates_nothing_and_names_what_exists(harness: Harness) -> None:
    client = harness.client
    await client.create_jobs([hourly("h", harness.tmp / "l")])
    since, until = last_hours(harness.clock.now(), 5)
    await client.pause_job("h")  # nothing runs: the states stay as they are
    done = await client.backfill("h", since, since + 2 * HOUR)
    assert done.created == 2
    preview = await client.backfill("h", since, until, dry_run=True)
    assert preview.fire_times == [since + i * HOUR for i in range(5)]
    assert preview.existing == [since, since + HOUR]
    assert (len(preview.new), preview.created, preview.occurrences) == (3, 0, [])
    assert (preview.overlap, preview.overlap_chosen) == (Overlap.SKIP, False)
    assert len(await client.list_runs(job="h")) == 2  # the preview stored nothing
    chosen = await client.backfill("h", since, until, overlap="allow_all", dry_run=True)
    assert (chosen.overlap, chosen.overlap_chosen) == (Overlap.ALLOW_ALL, True)
    with pytest.raises(ValidationError, match="must be one of skip, buffer_one"):
        await client.backfill("h", since, until, overlap="sometimes")
    real = await client.backfill("h", since, until, overlap=Overlap.ALLOW_ALL)
    assert real.created == 3
    by_time = {o.scheduled_at: o.overlap for o in real.occurrences}
    # the runs that existed keep theirs (the job's own); the new ones get the choice
    assert [by_time[t] for t in preview.fire_times] == [None, None, *[Overlap.ALLOW_ALL] * 3]


async def test_allow_all_runs_every_backfilled_run_of_a_skip_job(harness: Harness) -> None:
    path = harness.tmp / "ledger.jsonl"
    await harness.client.create_jobs([hourly("h", path)])
    since, until = last_hours(harness.clock.now(), 5)
    result = await harness.client.backfill("h", since, until, overlap="allow_all")
    assert result.created == 5
    done = await harness.completed_n(5)
    assert {c.state for c in done} == {S.SUCCEEDED}
    assert len(ledger.read(path)) == 5


async def test_the_jobs_own_skip_skips_the_overlapping_runs(harness: Harness) -> None:
    path = harness.tmp / "ledger.jsonl"
    await harness.client.create_jobs([hourly("h", path)])
    since, until = last_hours(harness.clock.now(), 5)
    await harness.client.backfill("h", since, until)
    assert (await harness.completed()).state is S.SUCCEEDED
    states = [o.state for o in await harness.client.list_runs(job="h", newest_first=False)]
    assert states == [S.SUCCEEDED, *[S.SKIPPED_OVERLAP] * 4]
    assert len(ledger.read(path)) == 1


async def test_the_api_previews_then_creates(harness: Harness) -> None:
    await harness.client.create_jobs([hourly("h", harness.tmp / "l")])
    await harness.client.pause_job("h")
    since, until = last_hours(harness.clock.now(), 3)
    span = {"from": since.isoformat(), "to": until.isoformat()}
    app = create_app(harness.client, open_access=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://127.0.0.1") as api:
        r = await api.post("/api/v1/jobs/h/backfill", json={**span, "dry_run": True})
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["dry_run"], body["count"], body["new"], body["created"]) == (
            True, 3, 3, 0)
        assert (body["overlap"], body["overlap_source"], body["items"]) == ("skip", "job", [])
        assert body["overlap_note"].startswith("skip (the job's own)")
        assert len(body["fire_times"]) == 3
        assert (await api.get("/api/v1/runs", params={"job": "h"})).json()["items"] == []
        r = await api.post("/api/v1/jobs/h/backfill", json={**span, "overlap": "allow_all"})
        body = r.json()
        assert (body["dry_run"], body["created"], body["overlap_source"]) == (
            False, 3, "backfill")
        assert {(i["trigger"], i["overlap"]) for i in body["items"]} == {
            ("backfill", "allow_all")}
        for bad, field in (({"overlap": "never"}, "overlap"), ({"overlap": 3}, "overlap"),
                           ({"dry_run": "yes"}, "dry_run")):
            r = await api.post("/api/v1/jobs/h/backfill", json={**span, **bad})
            assert r.status_code == 422, r.text
            assert field in r.text


async def test_postgres_worker_runs_every_allow_all_run(
    worker: Worker, tmp_path: Path,  # noqa: F811  (the imported fixture)
) -> None:
    path = tmp_path / "ledger.jsonl"
    await worker.client.create_jobs([hourly("h", path)])
    since, until = last_hours(worker.client.clock.now(), 4)
    assert (await worker.client.backfill("h", since, until, overlap="allow_all")).created == 4
    for _ in range(4):
        assert (await worker.completed(timeout=10)).state is S.SUCCEEDED
    assert sorted(line["scheduled_at"] for line in ledger.read(path)) == [
        (since + i * HOUR).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(4)]
    runs = await worker.client.list_runs(job="h")
    assert {(o.trigger, o.state, o.overlap) for o in runs} == {
        (Trigger.BACKFILL, S.SUCCEEDED, Overlap.ALLOW_ALL)}


@pytest.mark.parametrize(("overlap", "ran"), [("allow_all", 4), (None, 1)])
async def test_redis_dispatches_backfilled_runs_by_their_overlap(
    stack: Stack, overlap: str | None, ran: int,  # noqa: F811  (the imported fixture)
) -> None:
    path = stack.tmp / "ledger.jsonl"
    await stack.client.create_jobs([hourly("h", path)])
    since, until = last_hours(stack.clock.now(), 4)
    assert (await stack.client.backfill("h", since, until, overlap=overlap)).created == 4
    assert (await stack.redis.promoter.run_once()).moved == 4  # the client fed the due set
    stack.start()
    done = await stack.completed(ran)
    assert {c.state for c in done} == {S.SUCCEEDED}
    assert len(ledger.read(path)) == ran
    states = sorted(o.state.value for o in await stack.client.list_runs(job="h"))
    assert states == sorted([S.SUCCEEDED.value] * ran + [S.SKIPPED_OVERLAP.value] * (4 - ran))
