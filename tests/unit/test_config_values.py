"""Settings' values: queue lists parsed, and validate()'s bounds named in its messages."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tickwork.config import Settings, parse_queues
from tickwork.errors import ConfigError
from tickwork.executors.base import ExecutorSettings

# --- parse_queues ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("default:16,mail:4", (("default", 16), ("mail", 4))),
    ("default", (("default", 256),)),
    (" a : 2 , b ", (("a", 2), ("b", 256))),
    ("mail.v2_x-y:10000", (("mail.v2_x-y", 10000),)),
])
def test_parse_queues(text: str, expected: tuple[tuple[str, int], ...]) -> None:
    assert parse_queues(text) == expected


@pytest.mark.parametrize(("text", "reason"), [
    ("", "must name at least one queue, e.g. 'default:16,mail:4'"),
    ("  ", "must name at least one queue, e.g. 'default:16,mail:4'"),
    ("a,,b", "has an entry with no queue name in 'a,,b'"),
    ("a,", "has an entry with no queue name in 'a,'"),
    (":4", "has an entry with no queue name in ':4'"),
    ("mail:x", "concurrency of 'mail' must be a whole number (got 'x')"),
    ("mail:-1", "concurrency of 'mail' must be a whole number (got '-1')"),
    ("mail:", "concurrency of 'mail' must be a whole number (got '')"),
    ("mail:2.5", "concurrency of 'mail' must be a whole number (got '2.5')"),
    ("mail:0", "concurrency of 'mail' must be from 1 to 10000 (got 0)"),
    ("mail:10001", "concurrency of 'mail' must be from 1 to 10000 (got 10001)"),
    ("a:1,a:2", "lists 'a' twice"),
    ("bad name:1", "queue name 'bad name' must be 1 to 64 letters, digits, '_', '.' or '-'"),
])
def test_parse_queues_rejects(text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_queues(text)
    assert (info.value.field, info.value.reason) == ("queues", reason)


# --- validate() -----------------------------------------------------------------------------


@pytest.mark.parametrize(("changes", "message"), [
    ({"heartbeat_seconds": 40.0}, "heartbeat_seconds: must be less than lease_seconds "
                                  "(got 40; lease_seconds is 30)"),
    ({"heartbeat_seconds": 30.0}, "heartbeat_seconds: must be less than lease_seconds "
                                  "(got 30; lease_seconds is 30)"),
    ({"planner_interval_seconds": 10.0}, "planner_interval_seconds: must be at most "
                                         "planner_horizon_seconds (got 10; "
                                         "planner_horizon_seconds is 5)"),
    ({"lease_seconds": 0.0}, "lease_seconds: must be a finite number greater than 0 (got 0)"),
    ({"shard_lease_seconds": 0.0},
     "shard_lease_seconds: must be a finite number greater than 0 (got 0)"),
    ({"shard_lease_seconds": float("inf")},
     "shard_lease_seconds: must be a finite number greater than 0 (got inf)"),
    ({"shard_lease_seconds": 0.5}, "shard_lease_seconds: must be at least 1 second (got 0.5)"),
    ({"poll_interval_seconds": -1.0},
     "poll_interval_seconds: must be a finite number greater than 0 (got -1)"),
    ({"planner_horizon_seconds": float("inf")},
     "planner_horizon_seconds: must be a finite number greater than 0 (got inf)"),
    ({"rescue_interval_seconds": float("nan")},
     "rescue_interval_seconds: must be a finite number greater than 0 (got nan)"),
    ({"shutdown_grace_seconds": -1.0},
     "shutdown_grace_seconds: must be a finite number at least 0 (got -1)"),
    ({"port": 70000}, "port: must be from 0 to 65535 (got 70000)"),
    ({"host": ""}, "host: must not be empty"),
    ({"worker_id": " "}, "worker_id: must not be empty"),
    ({"database": "mysql://root:hunter2@db/x"},
     "database: must be sqlite:///PATH or postgresql://... (got a 'mysql' URL)"),
    ({"database": "tickwork.db"},
     "database: must be sqlite:///PATH or postgresql://... (got no scheme)"),
    ({"database": "sqlite://tickwork.db"},
     "database: must be sqlite:///PATH, with three slashes and a path"),
    ({"database": "sqlite:///"}, "database: must be sqlite:///PATH, with three slashes and a path"),
    ({"redis": "http://cache:6379"},
     "redis: must be redis://host:6379/0, redis+cluster://host:7000,host:7001/ or "
     "redis+sentinel://host:26379,host:26380/MASTER/0 (got a 'http' URL)"),
    ({"redis": "redis+cluster://a:7000,b:x/"},
     "redis: node 'b:x': the port must be a number in 1..65535"),
    ({"redis": "redis+cluster://a:7000/3"},
     "redis: a Redis Cluster has database 0 only: end the URL with / or /0"),
    ({"redis": "redis+sentinel://s1:26379/"},
     "redis: a redis+sentinel URL ends with /MASTER_NAME or /MASTER_NAME/DB"),
    ({"queues": ()}, "queues: must name at least one queue, e.g. 'default:16,mail:4'"),
    ({"queues": (("default", 0),)}, "queues: concurrency of 'default' must be from 1 to 10000 "
                                    "(got 0)"),
    ({"log_level": "loud"},
     "log_level: must be one of debug, info, warning, error, critical (got 'loud')"),
    ({"executors": ExecutorSettings(shell_enabled=True)},
     "executors.shell_allowed_executables: must name at least one executable when "
     "executors.shell_enabled is true"),
    ({"executors": ExecutorSettings(output_limit_bytes=0)},
     "executors.output_limit_bytes: must be at least 1 (got 0)"),
])
def test_validate_names_the_fields_and_the_bound(changes: dict[str, Any], message: str) -> None:
    settings = dataclasses.replace(Settings(), **changes)
    with pytest.raises(ConfigError) as info:
        settings.validate()
    assert str(info.value) == message
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize("changes", [
    {"database": "postgresql://u:p@db/tickwork", "redis": "redis://cache"},
    {"database": "postgres://db/tickwork", "redis": "unix:///run/redis.sock"},
    {"database": "sqlite:////var/lib/tickwork.db"},
    {"database": "sqlite://:memory:"},
    {"database": "sqlite:///:memory:"},
    {"port": 0},
    {"heartbeat_seconds": 29.0},
    {"planner_interval_seconds": 5.0},
    {"shutdown_grace_seconds": 0.0},
    {"executors": ExecutorSettings(shell_enabled=True, shell_allowed_executables=("backup",))},
])
def test_validate_accepts(changes: dict[str, Any]) -> None:
    dataclasses.replace(Settings(), **changes).validate()
