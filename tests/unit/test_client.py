"""The Python client (async core, sync facade), the @tickwork.job decorator, the service's sync."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pytest

import tickwork
from tickwork import registry
from tickwork.cli.demo import tick
from tickwork.client import AsyncClient, Client
from tickwork.clock import FakeClock
from tickwork.config import Settings
from tickwork.errors import Conflict, JobNotFound, ValidationError
from tickwork.models import OccurrenceState, Trigger
from tickwork.runtime.embedded import EmbeddedService
from tickwork.testing.factories import add_occurrences
from tickwork.testing.harness import START

JOB = {"name": "ping", "schedule": {"every": "1m"}, "kind": "http",
       "payload": {"url": "https://example.org/health"}}


def test_sync_client_creates_previews_and_lists(tmp_path: Path) -> None:
    with Client.open(f"sqlite:///{tmp_path}/c.db", clock=FakeClock(START)) as client:
        job = client.create_job(JOB)
        assert job.next_run_at == START
        assert client.preview("ping", 3) == [START + timedelta(minutes=m) for m in (1, 2, 3)]
        assert [j.spec.name for j in client.list_jobs()] == ["ping"]
        with pytest.raises(Conflict):
            client.create_job(JOB)
        with pytest.raises(JobNotFound):
            client.get_job("nope")
        run = client.trigger_job("ping")
        assert (run.trigger, run.state) == (Trigger.MANUAL, OccurrenceState.SCHEDULED)
        assert [r.idempotency_key for r in client.list_runs(job="ping")] == [run.idempotency_key]


async def test_async_client_bulk_create_is_all_or_nothing(tmp_path: Path) -> None:
    async with await AsyncClient.open(f"sqlite:///{tmp_path}/c.db") as client:
        with pytest.raises(ValidationError) as err:
            await client.create_jobs([JOB, {**JOB, "name": "b", "kind": "nope"}])
        assert str(err.value) == ("[1].kind: must be one of http, slack, email, shell, python, "
                                  "publish (got 'nope')")
        assert await client.list_jobs() == []
        created = await client.create_jobs({**JOB, "name": f"j{i}"} for i in range(200))
        assert len(created) == 200


async def test_a_mistake_late_in_a_large_bulk_create_stores_nothing(tmp_path: Path) -> None:
    async with await AsyncClient.open(f"sqlite:///{tmp_path}/c.db") as client:
        docs = [{**JOB, "name": f"j{i}"} for i in range(1500)]
        with pytest.raises(ValidationError) as err:
            await client.create_jobs([*docs[:1200], {**JOB, "name": "bad", "priority": 5000}])
        assert err.value.field == "[1200].priority"
        assert await client.list_jobs() == []
        created = await client.create_jobs(docs)
        assert [j.spec.name for j in created] == [d["name"] for d in docs]
        assert await client.get_job("j1499") == created[-1]


async def test_update_keeps_the_next_run_unless_the_schedule_changes(tmp_path: Path) -> None:
    clock = FakeClock(START)
    async with await AsyncClient.open(f"sqlite:///{tmp_path}/c.db", clock=clock) as client:
        await client.create_job(JOB)
        clock.advance(10)
        same = await client.update_job("ping", {"tags": ["x"]})
        assert same.next_run_at == START
        moved = await client.update_job("ping", {"schedule": {"cron": "0 * * * *"}})
        assert moved.next_run_at == START + timedelta(hours=1)


async def test_a_new_schedule_drops_the_runs_the_old_one_planned(tmp_path: Path) -> None:
    """Planned within the planner's horizon, a fire time of the old schedule would still run
    after the schedule changed; an update that keeps the schedule leaves the plan alone."""
    clock = FakeClock(START)
    async with await AsyncClient.open(f"sqlite:///{tmp_path}/c.db", clock=clock) as client:
        job = await client.create_job(JOB)
        await add_occurrences(client.store, job, START + timedelta(minutes=1))
        clock.advance(10)
        await client.update_job("ping", {"tags": ["x"]})
        assert [r.scheduled_at for r in await client.list_runs(job="ping")] == [
            START + timedelta(minutes=1)]
        await client.update_job("ping", {"schedule": {"cron": "0 * * * *"}})
        assert await client.list_runs(job="ping") == []


async def test_resume_skips_fire_times_that_fell_while_paused(tmp_path: Path) -> None:
    clock = FakeClock(START)
    async with await AsyncClient.open(f"sqlite:///{tmp_path}/c.db", clock=clock) as client:
        await client.create_job(JOB)
        await client.pause_job("ping")
        clock.advance(3600 + 30)
        resumed = await client.resume_job("ping")
        assert resumed.next_run_at == START + timedelta(hours=1, minutes=1)
        assert resumed.spec.paused is False


def test_decorator_registers_a_validated_python_job() -> None:
    sys.modules.pop("sample_app.jobs", None)
    import sample_app.jobs  # noqa: F401  (registers its jobs)

    docs = {d["name"]: d for d in registry.registered()}
    cache = docs["sample_app.jobs.refresh_cache"]
    assert cache["schedule"] == {"cron": "*/5 * * * *", "timezone": "Europe/Berlin"}
    assert cache["payload"] == {"callable": "sample_app.jobs:refresh_cache"}
    assert docs["hourly-sum"]["payload"] == {"callable": "sample_app.jobs:add", "args": [1, 2]}


def test_decorator_rejects_bad_declarations_at_import() -> None:
    with pytest.raises(TypeError, match=r"exactly one of cron=, every= or at="):
        tickwork.job(cron="* * * * *", every="1m")
    with pytest.raises(ValidationError, match=r"schedule\.cron"):
        tickwork.job(cron="* * *")(tick)
    with pytest.raises(TypeError, match=r"needs a module-level function"):
        tickwork.job(cron="* * * * *")(lambda: None)


async def test_service_creates_declared_jobs_and_allows_their_module(tmp_path: Path) -> None:
    settings = Settings(database=f"sqlite:///{tmp_path}/s.db")
    service = EmbeddedService(settings, imports=("sample_app.jobs",))
    await service.start()
    try:
        names = {j.spec.name for j in await service.client.list_jobs()}
        assert {"sample_app.jobs.refresh_cache", "hourly-sum"} <= names
        assert "sample_app.jobs" in service.executor_settings.python_allowed_modules
    finally:
        await service.stop()
    # a second start finds them unchanged and creates nothing twice
    again = EmbeddedService(settings, imports=("sample_app.jobs",))
    await again.start()
    try:
        assert len(await again.client.list_jobs(name_contains="hourly-sum")) == 1
    finally:
        await again.stop()


async def test_a_second_service_on_the_same_file_is_refused(tmp_path: Path) -> None:
    settings = Settings(database=f"sqlite:///{tmp_path}/s.db")
    first = EmbeddedService(settings)
    await first.start()
    try:
        second = EmbeddedService(settings)
        with pytest.raises(ConnectionError, match="another tickwork service is already running"):
            await second.start()
    finally:
        await first.stop()
