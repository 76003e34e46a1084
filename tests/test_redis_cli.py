"""With Redis configured, a trigger from the CLI goes straight into Redis' due set."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from processes import cli, cli_json, env_for
from redis_server import PrivateRedis
from tickwork.drivers.dispatch import DueCountParams, occurrence_key
from tickwork.drivers.redis.dispatch import RedisDispatch
from tickwork.testing import postgres as pg
from tickwork.testing.faults import redisserver

postgres_template = pg.postgres_template
postgres_url = pg.postgres_url

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
