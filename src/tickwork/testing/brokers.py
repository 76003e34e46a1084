"""The message brokers of the publish kind's tests: where they listen, and consumers.

``TICKWORK_TEST_AMQP_URL``, ``TICKWORK_TEST_NATS_URL`` and ``TICKWORK_TEST_MQTT_URL`` name the
servers (defaults: RabbitMQ, NATS with JetStream and Mosquitto on 127.0.0.1; Redis comes from
``testing/redis.py``). A test that finds its broker down is skipped with a message saying so;
with ``CI=true`` it fails instead, because a missing service in CI is a failure.

Every test uses names of its own (``tw-test-<hex>``), so tests can share the servers.
"""

from __future__ import annotations

import os
import socket
import uuid
from urllib.parse import urlsplit

import pytest

from tickwork.testing.redis import redis_url

URLS = {
    "amqp": ("TICKWORK_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"),
    "nats": ("TICKWORK_TEST_NATS_URL", "nats://127.0.0.1:4222"),
    "mqtt": ("TICKWORK_TEST_MQTT_URL", "mqtt://127.0.0.1:1883"),
}


def broker_url(family: str) -> str:
    """The test server of ``family`` (amqp, nats, mqtt or redis)."""
    if family == "redis":
        return redis_url()
    env, default = URLS[family]
    return os.environ.get(env, default)


def require(family: str) -> str:
    """The server's URL when its port answers; else a skip (a failure under CI=true)."""
    url = broker_url(family)
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 0), 2):
            pass
    except OSError as exc:
        env = URLS[family][0] if family in URLS else "TICKWORK_TEST_REDIS_URL"
        message = (f"{family} broker is not reachable at {parts.hostname}:{parts.port} "
                   f"({exc.strerror or exc}); start it (see .ci/run) or set {env}")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}. CI=true: a missing service is a failure here.")
        pytest.skip(message)
    return url


def unique(sep: str = "-") -> str:
    return f"tw-test{sep}{uuid.uuid4().hex[:12]}"
