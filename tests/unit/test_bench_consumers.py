"""The bench's consumers read a message's key, attempt and scheduled time from whatever the
broker carries: headers (RabbitMQ, NATS, MQTT 5), Redis fields as bytes, or nothing of ours."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import pytest

from tickwork.bench.consumers import DEFAULT_URLS, execution, open_consumer
from tickwork.bench.publish import BROKER_NAME, broker_env

AT = "2030-01-01T09:00:00Z"
EPOCH_AT = datetime(2030, 1, 1, 9, tzinfo=UTC).timestamp()


def test_headers_and_redis_fields_give_the_same_record() -> None:
    before = time.time()
    headers = execution({"Idempotency-Key": f"j1:{AT}", "Tickwork-Attempt": "2",
                         "Tickwork-Scheduled-At": AT, "Tickwork-Job-Id": "j1"})
    fields = execution({"idempotency_key": f"j1:{AT}".encode(), "attempt": b"2",
                        "scheduled_at": AT.encode(), "job": b"j1", "body": b"{}"})
    assert headers is not None
    assert fields is not None
    assert (headers.key, headers.attempt, headers.scheduled) == (f"j1:{AT}", 2, EPOCH_AT)
    assert (fields.key, fields.attempt, fields.scheduled) == (f"j1:{AT}", 2, EPOCH_AT)
    assert before <= headers.started <= time.time()  # arrival: when the consumer read it


def test_a_message_without_our_headers_is_not_counted() -> None:
    assert execution({"content-type": "application/json"}) is None


def test_each_broker_has_a_consumer_with_its_destination_field() -> None:
    fields = {"redis": "stream", "rabbitmq": "exchange", "nats": "subject", "mqtt": "topic"}
    for broker, field in fields.items():
        consumer = open_consumer(broker)
        assert consumer.url == DEFAULT_URLS[broker]
        assert consumer.destination()[field] == consumer.name
        assert consumer.drain() == []


def test_the_processes_get_the_broker_by_name_and_its_host_allowed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWORK_OUTBOUND_ALLOW", "10.0.0.0/8")
    env = broker_env("amqp://guest:guest@127.0.0.1:5672/")
    assert env["TICKWORK_BROKERS"] == f'{{"{BROKER_NAME}": "amqp://guest:guest@127.0.0.1:5672/"}}'
    assert env["TICKWORK_OUTBOUND_ALLOW"] == "10.0.0.0/8,127.0.0.1"
    assert os.environ["TICKWORK_OUTBOUND_ALLOW"] == "10.0.0.0/8"  # the bench's own is untouched
