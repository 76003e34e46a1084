"""Traces: a span per attempt through OpenTelemetry's SDK (in-memory exporter), its trace
context sent to a real local HTTP server and with messages to the real brokers as
``traceparent``; nothing imported when off."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiomqtt
import aiormq
import nats
import pytest
from aiohttp import web
from nats.js.api import StreamConfig
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from redis.asyncio import Redis

from tickwork.config import Settings
from tickwork.errors import ConfigError
from tickwork.models import rfc3339
from tickwork.runtime import tracing
from tickwork.runtime.tracing import attempt_tracer, tracing_wanted
from tickwork.testing.brokers import require, unique
from tickwork.testing.harness import START, Harness, make_harness
from tickwork.worker.otel import OtelAttempts


def traced(h: Harness) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    h.pool.tracer = OtelAttempts(provider)
    return exporter


@pytest.fixture
def spans(harness: Harness) -> InMemorySpanExporter:
    return traced(harness)


def traceparent(span: ReadableSpan) -> str:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


@pytest.fixture
async def target() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """A local HTTP server that records the headers of each request."""
    seen: list[dict[str, str]] = []

    async def hook(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}/hook", seen
    await runner.cleanup()


async def test_an_http_attempt_is_a_span_and_its_target_gets_traceparent(
        harness: Harness, spans: InMemorySpanExporter,
        target: tuple[str, list[dict[str, str]]]) -> None:
    h = harness
    url, seen = target
    job = await h.client.create_job({
        "name": "hook", "schedule": {"at": h.clock.now().isoformat()}, "kind": "http",
        "queue": "default", "payload": {"method": "POST", "url": url, "body": {"a": 1}}})
    await h.tick()
    completion = await h.completed()
    assert completion.outcome.value == "succeeded"
    (span,) = spans.get_finished_spans()
    assert span.name == "tickwork.attempt hook"
    assert span.kind is SpanKind.CONSUMER
    assert span.status.status_code is StatusCode.OK
    attributes = dict(span.attributes or {})
    key = attributes.pop("tickwork.idempotency_key")
    assert isinstance(key, str)
    assert key.startswith(f"{job.id}:")
    assert attributes == {
        "tickwork.job.id": job.id, "tickwork.job.name": "hook", "tickwork.job.kind": "http",
        "tickwork.queue": "default", "tickwork.attempt": 1,
        "tickwork.scheduled_at": attributes["tickwork.scheduled_at"],
        "tickwork.outcome": "succeeded", "tickwork.state": "succeeded"}
    assert str(attributes["tickwork.scheduled_at"]).endswith("Z")
    (headers,) = seen
    assert headers["traceparent"] == traceparent(span)
    assert span.get_span_context().trace_flags.sampled
    assert headers["Idempotency-Key"] == key


async def test_a_publish_attempt_sends_its_trace_context_with_the_message(
        tmp_path: Path) -> None:
    """Each broker carries ``traceparent`` where it carries the idempotency key: a Redis
    stream field, RabbitMQ headers, NATS headers, MQTT 5 user properties, MQTT 3.1.1's JSON
    envelope; each message the trace context of its own attempt's span."""
    urls = {family: require(family) for family in ("redis", "amqp", "nats", "mqtt")}
    stream, exchange, queue, subject = unique(), unique(), unique(), unique(".")
    topics = {"mqtt": f"{unique()}/v5", "mqtt3": f"{unique()}/v3"}
    redis = Redis.from_url(urls["redis"], decode_responses=True)
    amqp = await aiormq.connect(urls["amqp"])
    nc = await nats.connect(urls["nats"])
    js = nc.jetstream()
    got: dict[str, asyncio.Queue[Any]] = {name: asyncio.Queue() for name in ("amqp", "nats")}
    mqtt_url = urlsplit(urls["mqtt"])
    try:
        channel = await amqp.channel()
        await channel.exchange_declare(exchange, exchange_type="fanout", auto_delete=True)
        await channel.queue_declare(queue, exclusive=True, auto_delete=True)
        await channel.queue_bind(queue, exchange, routing_key="")
        await channel.basic_consume(queue, got["amqp"].put, no_ack=True)
        await js.add_stream(StreamConfig(name=unique("_"), subjects=[subject]))
        await nc.subscribe(subject, cb=got["nats"].put)
        async with aiomqtt.Client(mqtt_url.hostname or "127.0.0.1", mqtt_url.port or 1883,
                                  protocol=aiomqtt.ProtocolVersion.V5) as sub:
            for topic in topics.values():
                await sub.subscribe(topic, qos=1)
            brokers = (*urls.items(), ("mqtt3", f"{urls['mqtt']}?protocol=3.1.1"))
            payloads = {"redis": {"stream": stream}, "amqp": {"exchange": exchange},
                        "nats": {"subject": subject}, "mqtt": {"topic": topics["mqtt"]},
                        "mqtt3": {"topic": topics["mqtt3"]}}
            async with make_harness(tmp_path, brokers=brokers) as h:
                spans = traced(h)
                for name, where in payloads.items():
                    await h.client.create_job({
                        "name": name, "schedule": {"at": rfc3339(START)}, "kind": "publish",
                        "payload": {"broker": name, "body": {"from": name}, **where},
                        "retry": {"max_attempts": 1}})
                await h.tick()
                done = await h.completed_n(len(payloads))
            assert [c.error for c in done if c.state.value != "succeeded"] == []
            mqtt: dict[str, Any] = {}
            async with asyncio.timeout(10):
                async for message in sub.messages:
                    mqtt[str(message.topic)] = message
                    if len(mqtt) == len(topics):
                        break
        parent = {span.name.removeprefix("tickwork.attempt "): traceparent(span)
                  for span in spans.get_finished_spans()}
        assert len(set(parent.values())) == len(payloads)  # one trace per attempt
        [(_, fields)] = await redis.xrange(stream)
        assert fields["traceparent"] == parent["redis"]
        message = await asyncio.wait_for(got["amqp"].get(), 10)
        assert (message.header.properties.headers or {})["traceparent"] == parent["amqp"]
        message = await asyncio.wait_for(got["nats"].get(), 10)
        assert message.headers["traceparent"] == parent["nats"]
        v5 = mqtt[topics["mqtt"]]
        assert dict(v5.properties.UserProperty)["traceparent"] == parent["mqtt"]
        v3 = json.loads(bytes(mqtt[topics["mqtt3"]].payload))
        assert v3["tickwork"]["traceparent"] == parent["mqtt3"]
        assert v3["body"] == {"from": "mqtt3"}
    finally:
        await redis.delete(stream)
        await redis.aclose()
        await amqp.close()
        for info in await js.streams_info():
            if subject in (info.config.subjects or []):
                await js.delete_stream(info.config.name)
        await nc.close()


async def test_a_failed_attempt_is_an_error_span(
        harness: Harness, spans: InMemorySpanExporter) -> None:
    h = harness
    await h.client.create_job({
        "name": "flaky", "schedule": {"at": h.clock.now().isoformat()}, "kind": "python",
        "payload": {"callable": "tickwork.testing.jobs:boom", "args": ["kaput"]},
        "retry": {"max_attempts": 2}})
    await h.tick()
    await h.completed()
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert "kaput" in (span.status.description or "")
    assert (span.attributes or {})["tickwork.outcome"] == "failed"
    assert (span.attributes or {})["tickwork.state"] == "retrying"


def test_when_traces_are_wanted() -> None:
    off, on = Settings(), Settings(otel=True)
    assert not tracing_wanted(off, {})
    assert tracing_wanted(on, {})
    assert not tracing_wanted(on, {"OTEL_SDK_DISABLED": "true"})
    assert tracing_wanted(off, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing_wanted(off, {"OTEL_TRACES_EXPORTER": "console"})
    assert not tracing_wanted(off, {"OTEL_TRACES_EXPORTER": "none"})
    assert not tracing_wanted(off, {"OTEL_SERVICE_NAME": "x"})  # names, asks for nothing
    assert attempt_tracer(off, {}) is None


def test_the_setting_without_the_extra_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "otel_installed", lambda: False)
    with pytest.raises(ConfigError) as info:
        attempt_tracer(Settings(otel=True), {})
    assert str(info.value) == "otel: needs the otel extra: pip install 'tickwork[otel]'"
    # The standard variables may be meant for another program: no error, no traces.
    assert attempt_tracer(Settings(), {"OTEL_TRACES_EXPORTER": "otlp"}) is None


def test_traces_off_import_nothing_of_opentelemetry(tmp_path: Path) -> None:
    """A worker imports none of it; the API only what FastAPI itself imports (its native
    telemetry needs opentelemetry-api), never the SDK nor tickwork's tracer."""
    code = (
        "import sys\n"
        "from tickwork.config import Settings\n"
        "from tickwork.runtime.assemble import worker_pool\n"
        "from tickwork.runtime.worker import WorkerProcess\n"
        "from tickwork.executors.http import HttpExecutor\n"
        "from tickwork.runtime.tracing import attempt_tracer\n"
        "assert attempt_tracer(Settings(), {}) is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
        "from tickwork.api.app import create_app\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', \n"
        "                                                     'tickwork.worker.otel'))))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TICKWORK_"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=tmp_path, check=True, timeout=60)
    assert out.stdout.splitlines() == ["[]", "[]"], out.stderr


def test_without_a_provider_tickwork_sets_up_the_sdk(tmp_path: Path) -> None:
    """TICKWORK_OTEL=1 with the console exporter, in a process of its own (the global
    provider can be set once): service name tickwork, an attempt's span printed."""
    code = (
        "from types import SimpleNamespace as NS\n"
        "from datetime import datetime, UTC\n"
        "from opentelemetry import trace\n"
        "from tickwork.config import Settings\n"
        "from tickwork.runtime.tracing import attempt_tracer\n"
        "tracer = attempt_tracer(Settings(otel=True), {'OTEL_TRACES_EXPORTER': 'console'})\n"
        "job = NS(id='j1', spec=NS(name='nightly', kind='python'))\n"
        "occ = NS(queue='default', attempt=1, idempotency_key='j1:x',\n"
        "         scheduled_at=datetime(2025, 3, 1, 3, tzinfo=UTC))\n"
        "span = tracer.start(NS(job=job, occurrence=occ))\n"
        "print(sorted(span.headers))\n"
        "span.end(None, None)\n"
        "provider = trace.get_tracer_provider()\n"
        "print(provider.resource.attributes['service.name'])\n"
        "provider.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TICKWORK_"))}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=tmp_path, check=True, timeout=60)
    assert out.stdout.startswith("['traceparent']\ntickwork\n"), out.stdout  # then the span
    assert '"name": "tickwork.attempt nightly"' in out.stdout
    assert '"tickwork.outcome": "stopped"' in out.stdout
