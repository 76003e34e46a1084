"""What the processes show: /metrics and /healthz of ``tickwork worker`` and ``tickwork
scheduler`` (``--metrics-address``), the dispatch mode going from redis to degraded and back,
and ``tickwork run --redis`` on PostgreSQL and on SQLite.

Real processes on a database of their own and a private redis-server each test owns (it is
stopped with SIGSTOP here; the shared Redis never is). Waits are on log lines.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from test_postgres_processes import Proc, create, next_second, record_doc

from tickwork.api.process import create_process_app
from tickwork.config import DEFAULT_CONCURRENCY, Settings, load_settings, parse_address
from tickwork.drivers.redis.keys import Keyspace
from tickwork.errors import ConfigError
from tickwork.metrics import DispatchMode, Metrics
from tickwork.models import rfc3339
from tickwork.runtime.embedded import EmbeddedService
from tickwork.runtime.scheduler import SchedulerProcess
from tickwork.runtime.worker import WorkerProcess
from tickwork.testing import ledger
from tickwork.testing.faults.redisserver import PrivateRedis
from tickwork.testing.processes import cli, env_for

SERVED = r"{role} metrics on (http://\S+)/metrics"




def sample(text: str, series: str) -> float:
    """The value of one series (``name{labels}`` exactly as rendered) in exposition text."""
    values = [line.rsplit(" ", 1)[1] for line in text.splitlines()
              if line.rsplit(" ", 1)[0] == series]
    assert len(values) == 1, f"{series} appears {len(values)} times in:\n{text}"
    return float(values[0])


async def scrape(base: str) -> tuple[str, httpx.Response]:
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        metrics = await http.get("/metrics")
        assert metrics.status_code == 200, metrics.text
        assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
        return metrics.text, await http.get("/healthz")


async def entries_read(redis_url: str, queue: str = "default") -> int:
    """Stream entries Redis delivered to the workers' consumer group (trimming keeps it)."""
    keys = Keyspace("tickwork")
    client = Redis.from_url(redis_url, decode_responses=True)
    try:
        groups = await client.xinfo_groups(keys.stream(queue, keys.band_of(0)))
    finally:
        await client.aclose()
    return sum(int(g["entries-read"] or 0) for g in groups)


def one_off(name: str, path: Path, after: float = 1.0) -> dict[str, Any]:
    return record_doc(name, path, {"at": rfc3339(next_second(after=after))})


# --- settings -----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "address"), [
    ("127.0.0.1:9100", ("127.0.0.1", 9100)), ("[::1]:0", ("::1", 0)),
    ("0.0.0.0:80", ("0.0.0.0", 80)), ("metrics.internal:9100", ("metrics.internal", 9100)),
    (":9100", ("127.0.0.1", 9100)), ("9100", ("127.0.0.1", 9100)),
])
def test_metrics_addresses(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize(("text", "message"), [
    ("nope", "metrics_address: must be HOST:PORT, such as 127.0.0.1:9100 or [::1]:9100 "
             "(got 'nope')"),
    ("127.0.0.1:", "metrics_address: must be HOST:PORT"),
    ("::1:9100", "metrics_address: must be HOST:PORT"),
    ("127.0.0.1:70000", "metrics_address: port must be from 0 to 65535 (got 70000)"),
])
def test_bad_metrics_addresses(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env={"TICKWORK_METRICS_ADDRESS": text})
    assert str(info.value).startswith(message)


def test_max_deliveries_and_metrics_address_from_env_and_toml(tmp_path: Path) -> None:
    assert (Settings().max_deliveries, Settings().metrics_address) == (5, None)
    toml = tmp_path / "tickwork.toml"
    toml.write_text('max_deliveries = 3\nmetrics_address = "127.0.0.1:9100"\n')
    settings = load_settings(env={}, toml_path=str(toml))
    assert (settings.max_deliveries, settings.metrics_address) == (3, "127.0.0.1:9100")
    settings = load_settings(env={"TICKWORK_MAX_DELIVERIES": "9", "TICKWORK_METRICS_ADDRESS":
                                  ""}, toml_path=str(toml))
    assert (settings.max_deliveries, settings.metrics_address) == (9, None)  # "" unsets
    for env, message in (
        ({"TICKWORK_MAX_DELIVERIES": "0"}, "max_deliveries: must be at least 1 (got 0)"),
        ({"TICKWORK_MAX_DELIVERIES": "x"},
         "max_deliveries: must be an integer (got 'x' from TICKWORK_MAX_DELIVERIES)"),
    ):
        with pytest.raises(ConfigError) as info:
            load_settings(env=env)
        assert str(info.value) == message


@pytest.mark.parametrize(("args", "env", "message"), [
    (("worker", "--metrics-address", "nope"), {},
     "metrics_address: must be HOST:PORT, such as 127.0.0.1:9100 or [::1]:9100 (got 'nope')"),
    (("scheduler", "--metrics-address", "127.0.0.1:99999"), {},
     "metrics_address: port must be from 0 to 65535 (got 99999)"),
    (("worker",), {"TICKWORK_MAX_DELIVERIES": "0"},
     "max_deliveries: must be at least 1 (got 0)"),
    (("scheduler", "--shard-lease-seconds", "500ms"), {},
     "shard_lease_seconds: must be at least 1 second (got 0.5)"),
    (("scheduler", "--shard-lease-seconds", "soon"), {},
     "shard_lease_seconds: 'soon' is not a duration (use seconds or a duration like 90, 30s, "
     "15m, 1h, 1d, 1h30m or 500ms) (from --shard-lease-seconds)"),
    (("run", "--no-api"), {"TICKWORK_MAX_DELIVERIES": "many"},
     "max_deliveries: must be an integer (got 'many' from TICKWORK_MAX_DELIVERIES)"),
])
async def test_bad_settings_exit_2_with_one_line(tmp_path: Path, args: tuple[str, ...],
                                                 env: dict[str, str], message: str) -> None:
    code, out, err = await cli(env_for(tmp_path, **env), *args)
    assert (code, out, err) == (2, "", f"tickwork: error: {message}\n")


def test_dispatch_mode_counts_switches_to_degraded() -> None:
    mode = DispatchMode("redis")
    for switch in ("degraded", "degraded", "redis", "degraded", "redis"):
        mode.changed(switch)
    metrics = Metrics()
    metrics.dispatch = mode
    text = metrics.render_process("worker")
    assert sample(text, 'tickwork_dispatch_mode{mode="redis"}') == 1
    assert sample(text, 'tickwork_dispatch_mode{mode="degraded"}') == 0
    assert sample(text, "tickwork_dispatch_degraded_total") == 2
    assert "tickwork_repairs_total" not in text  # a worker's page has no scheduler figures
    metrics.dispatch = DispatchMode("postgres")
    text = metrics.render_process("worker")
    assert sample(text, 'tickwork_dispatch_mode{mode="postgres"}') == 1
    assert 'mode="degraded"' not in text
    assert "tickwork_dispatch_degraded_total" not in text


# --- the store unreachable ----------------------------------------------------------------


async def test_healthz_is_503_when_the_store_is_unreachable() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = Settings(database=f"postgresql://tickwork@127.0.0.1:{port}/none")
    for process in (WorkerProcess(settings), SchedulerProcess(settings, scheduler_id="s9")):
        app = create_process_app(process)
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://process") as http:
                r = await http.get("/healthz")
            assert r.status_code == 503
            assert r.json() == {"status": "unavailable", "role": process.kind,
                                "mode": "postgres", "store": "unreachable",
                                **({"id": None, "running": 0} if process.kind == "worker"
                                   else {"id": "s9", "shards": 0})}
        finally:
            await process.store.close()


# --- tickwork worker and tickwork scheduler ----------------------------------------------


async def test_max_deliveries_reaches_the_redis_claim_source(
        tmp_path: Path, postgres_url: str, private_redis: PrivateRedis) -> None:
    settings = Settings(database=postgres_url, redis=private_redis.url, max_deliveries=3,
                        metrics_address="127.0.0.1:0", api_enabled=False)
    worker = WorkerProcess(settings)
    service = EmbeddedService(settings)
    try:
        await worker.start()
        await service.start()
        assert worker.source is not None
        assert service.source is not None
        assert (worker.source.max_deliveries, service.source.max_deliveries) == (3, 3)
        assert worker.http is not None
        assert worker.http.port != 0
        text, health = await scrape(worker.http.url)
        assert health.json()["mode"] == worker.mode == service.mode == "redis"
        assert sample(text, "tickwork_redis_dead_lettered_total") == 0
    finally:
        await service.stop()
        await worker.stop()
    assert worker.http is None  # stopped with the process


@pytest.mark.slow
async def test_worker_and_scheduler_show_redis_degraded_and_redis_again(
        tmp_path: Path, postgres_url: str, private_redis: PrivateRedis) -> None:
    env = env_for(tmp_path, TICKWORK_DATABASE_URL=postgres_url,
                  TICKWORK_REDIS_URL=private_redis.url, TICKWORK_MAX_DELIVERIES="3")
    jobs_env = env_for(tmp_path, TICKWORK_DATABASE_URL=postgres_url)
    path = tmp_path / "ledger.jsonl"
    worker = Proc(env, "worker", "--worker-id", "w1", "--metrics-address", "127.0.0.1:0")
    scheduler = Proc(env, "scheduler", "--scheduler-id", "s1",
                     "--metrics-address", "127.0.0.1:0")
    try:
        await worker.start()
        await scheduler.start()
        w = (await worker.wait_for(SERVED.format(role="worker"))).group(1)
        s = (await scheduler.wait_for(SERVED.format(role="scheduler"))).group(1)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", w)
        assert not w.endswith(":0")

        await create(jobs_env, [one_off("first", path)])
        await worker.wait_for(r"first @ \S+ attempt 1: succeeded")
        text, health = await scrape(w)
        assert health.status_code == 200
        assert health.json() == {"status": "ok", "role": "worker", "mode": "redis",
                                 "store": "ok", "id": "w1", "running": 0}
        assert sample(text, 'tickwork_dispatch_mode{mode="redis"}') == 1
        assert sample(text, 'tickwork_dispatch_mode{mode="degraded"}') == 0
        assert sample(text, "tickwork_dispatch_degraded_total") == 0
        assert sample(text, 'tickwork_attempts_total{queue="default",result="success"}') == 1
        assert sample(text, 'tickwork_claims_total{queue="default"}') == 1
        assert sample(text, 'tickwork_claim_batches_total{queue="default"}') == 1
        assert sample(text, 'tickwork_attempt_duration_seconds_count{kind="python",'
                            'result="success"}') == 1
        assert sample(text, 'tickwork_worker_concurrency{queue="default"}') == DEFAULT_CONCURRENCY
        assert sample(text, "tickwork_redis_reclaimed_total") == 0
        assert "tickwork_occurrences{" not in text  # store-wide figures are the API's

        text, health = await scrape(s)
        assert health.json() == {"status": "ok", "role": "scheduler", "mode": "redis",
                                 "store": "ok", "id": "s1", "shards": 64}
        assert sample(text, "tickwork_occurrences_planned_total") == 1
        assert sample(text, 'tickwork_promoted_total{queue="default"}') >= 1
        assert 128 <= sample(text, 'tickwork_promoter_backlog{queue="default"}') <= 5000
        assert sample(text, "tickwork_shard_leases_held") == 64
        assert sample(text, 'tickwork_dispatch_mode{mode="redis"}') == 1
        assert sample(text, "tickwork_lease_expiries_total") == 0
        assert "tickwork_attempts_total" not in text
        assert await entries_read(private_redis.url) >= 1  # it came through the stream

        private_redis.pause()  # hung: reads time out, the worker claims from PostgreSQL
        await worker.wait_for(r"DEGRADED MODE", 30)
        text, health = await scrape(w)
        assert health.status_code == 200  # still doing its work
        assert health.json()["status"] == health.json()["mode"] == "degraded"
        assert sample(text, 'tickwork_dispatch_mode{mode="redis"}') == 0
        assert sample(text, 'tickwork_dispatch_mode{mode="degraded"}') == 1
        assert sample(text, "tickwork_dispatch_degraded_total") == 1
        text, health = await scrape(s)
        assert (health.status_code, health.json()["status"]) == (200, "degraded")
        assert sample(text, 'tickwork_dispatch_mode{mode="degraded"}') == 1

        await create(jobs_env, [one_off("second", path)])  # runs on the store's path
        await worker.wait_for(r"second @ \S+ attempt 1: succeeded")
        text, _ = await scrape(w)
        assert sample(text, 'tickwork_attempts_total{queue="default",result="success"}') == 2

        private_redis.resume()
        await worker.wait_for(r"leaving degraded mode", 30)
        text, health = await scrape(w)
        assert health.json()["status"] == "ok"
        assert health.json()["mode"] == "redis"
        assert sample(text, 'tickwork_dispatch_mode{mode="redis"}') == 1
        assert sample(text, "tickwork_dispatch_degraded_total") == 1
        assert (await scrape(s))[1].json()["mode"] == "redis"

        assert await worker.terminate() == 0
        assert await scheduler.terminate() == 0
    finally:
        await worker.close()
        await scheduler.close()
    assert sorted(r["job"] for r in ledger.read(path)) == ["first", "second"]


@pytest.mark.slow
async def test_a_taken_metrics_port_is_a_clear_error(tmp_path: Path, postgres_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        code, _, err = await cli(env_for(tmp_path, TICKWORK_DATABASE_URL=postgres_url),
                                 "scheduler", "--metrics-address", address)
    assert code == 1
    assert err.splitlines()[-1] == (f"tickwork: error: could not serve metrics on {address} "
                                    "(is the port in use?)")
    assert "Traceback" not in err


# --- tickwork run --redis -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["postgresql", "sqlite"])
async def test_run_with_redis_dispatches_through_it_and_shows_the_mode(
        tmp_path: Path, private_redis: PrivateRedis, request: pytest.FixtureRequest,
        driver: str) -> None:
    database = (request.getfixturevalue("postgres_url") if driver == "postgresql"
                else f"sqlite:///{tmp_path}/tickwork.db")
    env = env_for(tmp_path, TICKWORK_DATABASE_URL=database)
    path = tmp_path / "ledger.jsonl"
    service = Proc(env, "run", "--redis", private_redis.url, "--port", "0", "--open")
    try:
        await service.start()
        assert "dispatch redis" in "\n".join(service.lines)
        api = (await service.wait_for(r"dashboard: (http://\S+)/dashboard/")).group(1)
        await create(env, [one_off("via-redis", path)])
        await service.wait_for(r"via-redis @ \S+ attempt 1: succeeded")
        text, health = await scrape(api)
        assert health.json() == {"status": "ok", "store": "ok", "mode": "redis"}
        assert sample(text, 'tickwork_dispatch_mode{mode="redis"}') == 1
        assert sample(text, "tickwork_occurrences_planned_total") == 1
        assert sample(text, 'tickwork_promoted_total{queue="default"}') >= 1
        assert sample(text, 'tickwork_claims_total{queue="default"}') == 1
        assert 'tickwork_occurrences{state="running"}' in text  # and the store's figures
        assert await entries_read(private_redis.url) >= 1

        private_redis.pause()
        await service.wait_for(r"DEGRADED MODE", 30)
        text, health = await scrape(api)
        assert (health.status_code, health.json()) == (
            200, {"status": "degraded", "store": "ok", "mode": "degraded"})
        assert sample(text, "tickwork_dispatch_degraded_total") == 1
        private_redis.resume()
        await service.wait_for(r"leaving degraded mode", 30)
        assert (await scrape(api))[1].json()["mode"] == "redis"
        assert await service.terminate() == 0
    finally:
        await service.close()
    assert [r["job"] for r in ledger.read(path)] == ["via-redis"]


@pytest.mark.slow
async def test_run_without_redis_shows_its_store_as_the_mode(tmp_path: Path) -> None:
    service = Proc(env_for(tmp_path), "run", "--port", "0", "--open")
    try:
        await service.start()
        assert "dispatch redis" not in "\n".join(service.lines)
        api = (await service.wait_for(r"dashboard: (http://\S+)/dashboard/")).group(1)
        text, health = await scrape(api)
        assert health.json() == {"status": "ok", "store": "ok", "mode": "sqlite"}
        assert sample(text, 'tickwork_dispatch_mode{mode="sqlite"}') == 1
        assert "tickwork_dispatch_degraded_total" not in text
        assert await service.terminate() == 0
    finally:
        await service.close()


def test_metrics_of_the_api_alone_have_no_mode() -> None:
    text = Metrics().render(states={}, queues=[])
    assert "tickwork_dispatch_mode" not in text  # `tickwork api` claims nothing
