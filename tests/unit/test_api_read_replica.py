"""``read_database``: the API's job and run lists and its stats read through a second client
(a read replica's), everything else through the primary's.

A real replica is not needed to prove which connection a query used: the "replica" here is a
second database with different content, so what a list shows says where it was read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from test_api import DOC, Api

from tickwork.api import create_app
from tickwork.api.auth import create_token
from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.config import Settings
from tickwork.errors import ConfigError, NotMigrated
from tickwork.metrics import Metrics
from tickwork.runtime.api import ApiProcess
from tickwork.runtime.client import read_client_for
from tickwork.runtime.embedded import EmbeddedService
from tickwork.testing import postgres as pg
from tickwork.testing.harness import START


@pytest.fixture
def replica_url(postgres_template: str) -> Iterator[str]:
    """A second migrated database: the read side, with content of its own."""
    name = pg.create_database(template=postgres_template)
    try:
        yield pg.url_of(name)
    finally:
        pg.drop_database(name)


async def open_api(primary: str, replica: str | None) -> tuple[Api, AsyncClient | None]:
    client = await AsyncClient.open(primary, clock=FakeClock(START))
    reader = None if replica is None else await AsyncClient.open(replica, migrate=False)
    tokens = {scope: (await create_token(client, f"t-{scope}", scope))[0]
              for scope in ("read", "write", "admin")}
    app = create_app(client, metrics=Metrics(), read_client=reader)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                             base_url="http://127.0.0.1:8000")
    assert isinstance(client.clock, FakeClock)
    return Api(http=http, client=client, clock=client.clock, tokens=tokens), reader


@pytest.fixture
async def split(postgres_url: str, replica_url: str) -> AsyncIterator[tuple[Api, AsyncClient]]:
    api, reader = await open_api(postgres_url, replica_url)
    assert reader is not None
    yield api, reader
    await api.http.aclose()
    await reader.close()
    await api.client.close()


def names(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [j["name"] for j in response.json()["items"]]


async def test_lists_and_stats_read_the_read_database(split: tuple[Api, AsyncClient]) -> None:
    api, replica = split
    assert (await api.post("/api/v1/jobs", json=DOC)).status_code == 201  # the primary
    await replica.create_job({**DOC, "name": "only-on-the-replica"})
    await replica.trigger_job("only-on-the-replica")

    assert names(await api.get("/api/v1/jobs")) == ["only-on-the-replica"]
    runs = (await api.get("/api/v1/runs")).json()["items"]
    assert [r["job_name"] for r in runs] == ["only-on-the-replica"]
    stats = (await api.get("/api/v1/stats")).json()
    assert stats["jobs"] == 1
    assert sum(stats["occurrences_by_state"].values()) == 1  # the replica's one run
    # One job, a write, and the runs of one job read the primary: it is the source of truth.
    assert (await api.get("/api/v1/jobs/nightly")).status_code == 200
    assert (await api.get("/api/v1/jobs/only-on-the-replica")).status_code == 404
    assert (await api.post("/api/v1/jobs/nightly/pause")).json()["paused"] is True


async def test_the_same_url_as_read_database_serves_what_the_primary_holds(
        postgres_url: str) -> None:
    api, reader = await open_api(postgres_url, postgres_url)
    try:
        assert (await api.post("/api/v1/jobs", json=DOC)).status_code == 201
        assert (await api.post("/api/v1/jobs/nightly/trigger")).status_code == 201
        assert names(await api.get("/api/v1/jobs")) == ["nightly"]
        assert len((await api.get("/api/v1/runs")).json()["items"]) == 1
        assert (await api.get("/api/v1/stats")).json()["jobs"] == 1
    finally:
        await api.http.aclose()
        assert reader is not None
        await reader.close()
        await api.client.close()


async def test_unset_reads_the_primary(postgres_url: str) -> None:
    assert await read_client_for(Settings(database=postgres_url)) is None
    api, _ = await open_api(postgres_url, None)
    try:
        assert (await api.post("/api/v1/jobs", json=DOC)).status_code == 201
        assert names(await api.get("/api/v1/jobs")) == ["nightly"]
    finally:
        await api.http.aclose()
        await api.client.close()


async def test_the_api_process_serves_lists_from_read_database(
        postgres_url: str, replica_url: str) -> None:
    """``tickwork api --read-database``: the process opens the read client and uses it."""
    replica = await AsyncClient.open(replica_url, migrate=False)
    try:
        await replica.create_job({**DOC, "name": "replica-job"})
    finally:
        await replica.close()
    settings = Settings(database=postgres_url, read_database=replica_url, port=0,
                        open_access=True)
    settings.validate()
    process = ApiProcess(settings)
    await process.start()
    try:
        async with httpx.AsyncClient(base_url=process.http.url) as http:
            assert (await http.post("/api/v1/jobs", json=DOC)).status_code == 201
            listed = await http.get("/api/v1/jobs")
            one = await http.get("/api/v1/jobs/nightly")
    finally:
        await process.stop()
    assert names(listed) == ["replica-job"]
    assert one.status_code == 200


async def test_tickwork_run_serves_lists_from_read_database(tmp_path: Path) -> None:
    """``tickwork run --read-database``: the embedded service's API reads its lists there."""
    replica_url = f"sqlite:///{tmp_path}/replica.db"
    replica = await AsyncClient.open(replica_url)
    try:
        await replica.create_job({**DOC, "name": "replica-job"})
    finally:
        await replica.close()
    service = EmbeddedService(Settings(database=f"sqlite:///{tmp_path}/main.db",
                                       read_database=replica_url, port=0, open_access=True))
    await service.start()
    try:
        assert service.api is not None
        async with httpx.AsyncClient(base_url=service.api.url) as http:
            assert (await http.post("/api/v1/jobs", json=DOC)).status_code == 201
            listed = await http.get("/api/v1/jobs")
    finally:
        await service.stop()
    assert names(listed) == ["replica-job"]
    assert service.reader is None  # closed with the service


async def test_an_unmigrated_read_database_is_refused(postgres_url: str) -> None:
    name = pg.create_database()  # empty: no schema
    try:
        with pytest.raises(NotMigrated, match="not migrated"):
            await read_client_for(Settings(database=postgres_url,
                                           read_database=pg.url_of(name)))
    finally:
        pg.drop_database(name)


def test_a_read_database_that_is_not_a_database_url_is_refused() -> None:
    with pytest.raises(ConfigError, match="read_database"):
        replace(Settings(), read_database="redis://127.0.0.1:6379/0").validate()
