"""Trigger chains end to end: a run's end triggers the named jobs, which see the upstream run;
on SQLite (the harness), PostgreSQL (a worker woken by NOTIFY) and PostgreSQL + Redis (the
chained run goes through the due set like any trigger). Saving refuses a missing target or a
cycle, in Python and with 422 from the API. The store side is in the conformance suite
(tickwork.testing.conformance.chaining)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_postgres_worker import Worker, worker  # noqa: F401  (the fixture)
from test_redis_worker import Stack, stack  # noqa: F401  (the fixture)

from tickwork.api import create_app
from tickwork.drivers.dispatch import DueCountParams
from tickwork.errors import ValidationError
from tickwork.models import OccurrenceState, Trigger
from tickwork.testing import ledger
from tickwork.testing.harness import Harness

S = OccurrenceState


def recorder(name: str, path: Path, *, fail_attempts: int = 0, max_attempts: int = 3,
             **chains: list[str]) -> dict[str, Any]:
    """A python job that appends to the ledger; runs only when triggered (a far-off at)."""
    return {"name": name, "schedule": {"at": "2099-01-01T00:00:00Z"}, "kind": "python",
            "retry": {"max_attempts": max_attempts, "backoff_base_seconds": 1,
                      "backoff_max_seconds": 1, "jitter": "none"},
            "payload": {"callable": "tickwork.testing.ledger:record",
                        "kwargs": {"path": str(path), "fail_attempts": fail_attempts}},
            **chains}


async def test_success_runs_the_next_job_with_the_upstream(harness: Harness) -> None:
    path = harness.tmp / "ledger.jsonl"
    await harness.client.create_jobs([
        recorder("extract", path, on_success=["load"], on_dead=["alert"]),
        recorder("load", path), recorder("alert", path)])
    up = await harness.client.trigger_job("extract")
    first = await harness.completed()
    assert (first.state, first.chain is not None) == (S.SUCCEEDED, True)
    chained = await harness.completed()
    assert chained.state is S.SUCCEEDED
    lines = ledger.read(path)
    assert [line["job"] for line in lines] == ["extract", "load"]
    load = lines[1]
    assert load["upstream"] == up.idempotency_key
    assert load["upstream_event"] == "success"
    assert load["upstream_output"] == f"recorded {up.idempotency_key}"


async def test_failures_and_death_trigger_their_jobs(harness: Harness) -> None:
    path = harness.tmp / "ledger.jsonl"
    await harness.client.create_jobs([
        recorder("flaky", path, fail_attempts=5, max_attempts=2, on_failure=["retrying"],
                 on_dead=["paged"]),
        recorder("retrying", path), recorder("paged", path)])
    await harness.client.trigger_job("flaky")
    assert (await harness.completed()).state is S.RETRYING
    assert (await harness.completed()).state is S.SUCCEEDED  # "retrying" ran
    await harness.tick(2)  # the retry is due
    assert (await harness.completed()).state is S.DEAD
    assert (await harness.completed()).state is S.SUCCEEDED  # "paged" ran
    events = [(line["job"], line.get("upstream_event")) for line in ledger.read(path)]
    assert events == [("flaky", None), ("retrying", "failure"), ("flaky", None),
                      ("paged", "dead")]


async def test_saving_refuses_missing_targets_and_cycles(harness: Harness) -> None:
    path = harness.tmp / "ledger.jsonl"
    client = harness.client
    with pytest.raises(ValidationError) as missing:
        await client.create_job(recorder("a", path, on_success=["nobody"]))
    assert (missing.value.field, missing.value.reason) == (
        "on_success[0]", "no job is named 'nobody'")
    with pytest.raises(ValidationError) as itself:
        await client.create_job(recorder("a", path, on_failure=["a"]))
    assert itself.value.field == "on_failure[0]"
    assert "a -> a" in itself.value.reason
    await client.create_jobs([recorder("a", path, on_success=["b"]), recorder("b", path)])
    with pytest.raises(ValidationError) as loop:
        await client.update_job("b", {"on_dead": ["a"]})
    assert loop.value.field == "on_dead[0]"
    assert "b -> a -> b" in loop.value.reason
    with pytest.raises(ValidationError) as in_batch:
        await client.create_jobs([recorder("x", path, on_success=["y"]),
                                  recorder("y", path, on_success=["x"])])
    assert in_batch.value.field == "[0].on_success[0]"
    assert (await client.get_job("a")).spec.on_success == ("b",)


async def test_the_api_answers_422_naming_the_field(harness: Harness) -> None:
    app = create_app(harness.client, open_access=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as api:
        doc = recorder("a", harness.tmp / "l", on_success=["a"])
        r = await api.post("/api/v1/jobs", json=doc)
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["field"] == "on_success[0]"
        doc = recorder("a", harness.tmp / "l", on_dead=["ghost"])
        r = await api.post("/api/v1/jobs", json=doc)
        assert r.status_code == 422
        assert r.json()["errors"] == [{"field": "on_dead[0]",
                                       "message": "no job is named 'ghost'"}]
        r = await api.post("/api/v1/jobs", json=[recorder("b", harness.tmp / "l"),
                                                 recorder("a", harness.tmp / "l",
                                                          on_dead=["b"])])
        assert r.status_code == 201, r.text
        shown = (await api.get("/api/v1/jobs/a")).json()
        assert (shown["on_success"], shown["on_failure"], shown["on_dead"]) == ([], [], ["b"])


async def test_postgres_worker_runs_the_chained_job(
    worker: Worker, tmp_path: Path,  # noqa: F811  (the imported fixture)
) -> None:
    path = tmp_path / "ledger.jsonl"
    await worker.client.create_jobs([recorder("load", path),
                                     recorder("extract", path, on_success=["load"])])
    up = await worker.client.trigger_job("extract")
    await worker.completed(timeout=5)
    await worker.completed(timeout=5)  # NOTIFY woke the worker for the chained run
    lines = ledger.read(path)
    assert [(line["job"], line.get("upstream")) for line in lines] == [
        ("extract", None), ("load", up.idempotency_key)]
    (chained,) = [o for o in await worker.client.list_runs(job="load")
                  if o.trigger is Trigger.CHAIN]
    assert chained.upstream is not None
    assert chained.upstream.scheduled_at == up.scheduled_at


async def test_redis_dispatches_the_chained_run(
    stack: Stack,  # noqa: F811  (the imported fixture)
) -> None:
    path = stack.tmp / "ledger.jsonl"
    await stack.client.create_jobs([recorder("load", path),
                                    recorder("extract", path, on_success=["load"])])
    up = await stack.client.trigger_job("extract")
    assert (await stack.redis.promoter.run_once()).moved == 1
    stack.start()
    (done,) = await stack.completed(1)
    assert done.chain is not None
    # The worker's source put the chained run into the due set; the promoter moves it on.
    for _ in range(100):
        if await stack.dispatch.due_count(DueCountParams("default")) == 1:
            break
        await asyncio.sleep(0.02)
    assert (await stack.redis.promoter.run_once()).moved == 1
    (chained,) = await stack.completed(1)
    assert chained.state is S.SUCCEEDED
    lines = ledger.read(path)
    assert [(line["job"], line.get("upstream")) for line in lines] == [
        ("extract", None), ("load", up.idempotency_key)]
