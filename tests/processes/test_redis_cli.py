"""With Redis configured, a trigger from the CLI or the API goes straight into Redis' due set."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import httpx

from tickwork.api import create_app
from tickwork.config import load_settings
from tickwork.drivers.dispatch import DueCountParams, occurrence_key
from tickwork.drivers.redis.dispatch import RedisDispatch
from tickwork.runtime.client import client_for
from tickwork.testing.faults import redisserver
from tickwork.testing.faults.redisserver import PrivateRedis
from tickwork.testing.processes import cli, cli_json, env_for

redis = redisserver.private_redis


async def test_a_cli_trigger_is_in_the_due_set_at_once(
    postgres_url: str, redis: PrivateRedis, tmp_path: Path
) -> None:
    env = env_for(tmp_path, TICKWORK_DATABASE_URL=postgres_url)
    code, _, err = await cli(env, "jobs", "create", "--json", "-", stdin=json.dumps({
        "name": "ping", "schedule": {"every": "1d"}, "kind": "python",
        "payload": {"callable": "tickwork.testing.jobs:greet", "args": ["x"]}}))
    assert code == 0, err
    dispatch = RedisDispatch.from_url(redis.url)
    try:
        assert await dispatch.due_count(DueCountParams("default")) == 0
        run = await cli_json(env, "jobs", "trigger", "ping", "--redis", redis.url)
        members = await dispatch.client.zrange(dispatch.keys.due("default"), 0, -1)
        scheduled_at = datetime.fromisoformat(run["scheduled_at"].replace("Z", "+00:00"))
        assert len(members) == 1
        assert members[0].endswith(occurrence_key(run["job_id"], scheduled_at))
    finally:
        await dispatch.close()


async def test_an_api_trigger_and_backfill_are_in_the_due_set_at_once(
    redis: PrivateRedis, tmp_path: Path
) -> None:
    """`tickwork api --redis URL` opens its client as client_for does: what the API triggers or
    backfills is added to the due set when committed, not at the reconciler's next repair."""
    settings = load_settings(flags={"database": f"sqlite:///{tmp_path}/api.db",
                                    "redis": redis.url, "open_access": True})
    client = await client_for(settings)
    dispatch = RedisDispatch.from_url(redis.url)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(client,
                                                                          open_access=True)),
                             base_url="http://127.0.0.1:8000")
    try:
        r = await http.post("/api/v1/jobs", json={
            "name": "ping", "schedule": {"every": "1h"}, "kind": "python",
            "payload": {"callable": "tickwork.cli.demo:tick"}})
        assert r.status_code == 201, r.text
        assert await dispatch.due_count(DueCountParams("default")) == 0
        assert (await http.post("/api/v1/jobs/ping/trigger")).status_code == 201
        assert await dispatch.due_count(DueCountParams("default")) == 1
        r = await http.post("/api/v1/jobs/ping/backfill", json={
            "from": "2020-01-01T00:00:00Z", "to": "2020-01-01T03:00:00Z"})
        assert r.status_code in (200, 201), r.text
        assert await dispatch.due_count(DueCountParams("default")) == 4
    finally:
        await http.aclose()
        await dispatch.close()
        await client.close()
