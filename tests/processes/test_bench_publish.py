"""``tickwork bench publish``, bounded: a few hundred publish jobs per broker, judged on
correctness only (every message arrived once, none early) and the JSON shape, never speed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tickwork.testing.brokers import require
from tickwork.testing.processes import TICKWORK

pytestmark = [pytest.mark.bench, pytest.mark.slow]

FAMILIES = {"redis": "redis", "rabbitmq": "amqp", "nats": "nats", "mqtt": "mqtt"}


async def run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *TICKWORK, "bench", "publish", *args, "--quiet", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 110)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def bench(*args: str) -> dict[str, Any]:
    status, out, err = await run(*args, "--json")
    assert status == 0, err[-3000:] + out[-3000:]
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.mark.parametrize("broker", list(FAMILIES))
async def test_every_message_arrives_once(broker: str, tmp_path: Path) -> None:
    url = require(FAMILIES[broker])
    result = await bench("--broker", broker, "--broker-url", url, "--jobs", "300",
                         "--database", f"sqlite:///{tmp_path}/b.db")
    assert (result["expected"], result["executed"]) == (300, 300)
    assert (result["lost"], result["duplicated"], result["early"]) == (0, 0, 0)
    assert result["ok"] is True
    late = result["lateness_seconds"]
    assert 0 <= late["p50"] <= late["p99"] <= late["max"]
    assert result["workload"] == "publish"
    assert result["parameters"]["broker"] == broker
    assert result["messages_received"] == 300
    assert result["throughput_per_second"] > 0


async def test_an_unreachable_broker_is_a_clear_error(tmp_path: Path) -> None:
    """No consumer can start: exit status 2 and a message naming the option, no traceback."""
    status, _, err = await run("--broker", "nats", "--broker-url", "nats://127.0.0.1:1",
                               "--jobs", "10", "--database", f"sqlite:///{tmp_path}/b.db")
    assert status == 2, err
    assert "--broker-url" in err
    assert "Traceback" not in err
