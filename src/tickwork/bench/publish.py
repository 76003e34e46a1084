"""The publish workload: N publish jobs all due at one instant T, counted by a consumer.

Like W1, but each job publishes one message to a broker (Redis Streams, RabbitMQ, NATS
JetStream or MQTT) and the bench's own consumer counts what arrives, by the idempotency key
each message carries. The figures: creation rate, drain time from T to the last message's
arrival, throughput, lateness (arrival minus scheduled time: the start lateness plus the
publish and the delivery), lost, duplicated (a second copy of a key) and early messages.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from tickwork.bench.consumers import Consumer
from tickwork.bench.record import Tally, lateness_summary
from tickwork.bench.runner import Bench, CpuMeter, memory_figures
from tickwork.bench.w1 import correctness, lead_seconds, rounded
from tickwork.models import idempotency_key

BROKER_NAME = "bench"  # the name the jobs use; broker_env maps it to the consumer's URL


def broker_env(url: str) -> dict[str, str]:
    """What the processes need to publish to ``url``: the broker by name, and its host let
    through the outbound guard (a bench's broker is usually on this machine)."""
    host = urlsplit(url).hostname or "127.0.0.1"
    allowed = [a for a in os.environ.get("TICKWORK_OUTBOUND_ALLOW", "").split(",") if a]
    return {"TICKWORK_BROKERS": json.dumps({BROKER_NAME: url}),
            "TICKWORK_OUTBOUND_ALLOW": ",".join(dict.fromkeys([*allowed, host]))}


def publish_job(bench: Bench, consumer: Consumer, i: int, at: datetime) -> dict[str, Any]:
    return {"name": f"{bench.tag}-pub-{i}", "schedule": {"at": at.isoformat()},
            "kind": "publish", "payload": {"broker": BROKER_NAME, **consumer.destination(),
                                           "body": {"n": i}}}


async def run_publish(bench: Bench, consumer: Consumer, *, broker: str, jobs: int,
                      drain_timeout: float) -> dict[str, Any]:
    lead = lead_seconds(jobs, bench.warmup_rate)
    at = datetime.fromtimestamp(math.ceil(time.time() + lead), UTC)
    bench.progress.say(f"publish ({broker}): creating {jobs:,} jobs due at {at:%H:%M:%S} "
                       f"(in {lead:.0f}s)")
    created, took = await bench.create([publish_job(bench, consumer, i, at)
                                        for i in range(jobs)])
    creation_rate = len(created) / took if took else 0.0
    late_created = time.time() > at.timestamp()
    if late_created:
        bench.notes.append("creation finished after T: lateness includes creation time")
    tally = Tally(expected={idempotency_key(j.id, at): 0 for j in created})
    del created
    t = at.timestamp()
    meter = CpuMeter(bench.deployment)

    def note() -> str:
        if not tally.done:
            return f"T in {t - time.time():.1f}s" if time.time() < t else ""
        return f"{tally.done / max(tally.last_started - t, 1e-3):,.0f}/s"

    deadline = time.monotonic() + max(0.0, t - time.time()) + drain_timeout
    at_t = asyncio.create_task(meter.mark_at(t))
    drained = await bench.follow(tally, until=lambda: tally.lost == 0, deadline=deadline,
                                 note=note, read=consumer.drain)
    await at_t
    cpu = meter.figures(tally.done)
    bench.progress.finish(tally.done, note())
    if not drained:
        bench.notes.append(f"timed out {drain_timeout:.0f}s after T with {tally.lost:,} "
                           "messages not received")
    arrived = list(tally.first.values())
    drain = max(max(e.started for e in arrived) - t, 0.0) if arrived else None
    return {
        "workload": "publish",
        "parameters": {"jobs": jobs, "broker": broker, "lead_seconds": round(lead, 1)},
        "creation": {"jobs": jobs, "seconds": round(took, 3),
                     "jobs_per_second": round(creation_rate, 1),
                     "finished_before_t": not late_created},
        "drain_seconds": None if drain is None else round(drain, 3),
        "throughput_per_second": round(len(arrived) / drain, 1) if drain else None,
        "lateness_seconds": rounded(lateness_summary(tally.lateness())),
        **correctness(tally),
        "messages_received": consumer.received,
        "peak_memory": memory_figures(bench.deployment),
        "cpu_seconds": cpu,
    }
