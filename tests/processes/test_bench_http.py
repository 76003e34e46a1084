"""``tickwork bench http``, bounded: a few hundred requests per client through the command.

Asserts the figures are there, nothing failed and every request reached the server (which
counts them); never speed, which only the full run on a quiet machine measures.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from typing import Any

import pytest

from tickwork.testing.processes import TICKWORK

pytestmark = [pytest.mark.bench]

REQUESTS = 200


async def bench_http(*args: str) -> tuple[int, dict[str, Any]]:
    proc = await asyncio.create_subprocess_exec(
        *TICKWORK, "bench", "http", *args, "--json", "--quiet", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    assert not err, err.decode()[-3000:]
    return proc.returncode, json.loads(out)


async def test_every_client_sends_every_request() -> None:
    status, result = await bench_http("--requests", str(REQUESTS))
    assert status == 0, result
    assert result["ok"] is True
    assert (result["workload"], result["requests"], result["concurrency"]) == ("http", 200, 64)
    assert result["machine"]["cpus"] >= 1
    rows = {row["client"]: row for row in result["clients"]}
    assert list(rows) == ["aiohttp", "httpx", "executor"]
    if importlib.util.find_spec("httpx") is None:
        assert rows.pop("httpx")["skipped"] == "not installed"
    for name, row in rows.items():
        assert "skipped" not in row, name
        assert row["errors"] == 0, (name, row["first_error"])
        assert row["first_error"] is None
        assert row["server_received"] == REQUESTS, name
        if name != "httpx":  # whose pool may close a connection idle 5 s on a busy machine
            assert row["new_connections"] == 0, name  # the warm-up's connections were kept
        assert row["requests_per_second"] > 0
        assert row["cpu_ms_per_1000"] > 0
        assert 0 < row["latency_ms"]["p50"] <= row["latency_ms"]["p99"]
        assert row["version"]


async def test_a_chosen_client_and_the_table() -> None:
    proc = await asyncio.create_subprocess_exec(
        *TICKWORK, "bench", "http", "--requests", "50", "--concurrency", "4", "--clients",
        "executor", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-3000:]
    lines = out.decode().splitlines()
    assert lines[0].startswith("HTTP clients: 50 POSTs")
    assert lines[2].split()[:3] == ["client", "version", "req/s"]
    assert lines[3].startswith("tickwork HttpExecutor")
    assert len(lines) == 4
    assert "http executor" in err.decode()  # the progress line


async def test_an_unknown_client_is_refused() -> None:
    proc = await asyncio.create_subprocess_exec(
        *TICKWORK, "bench", "http", "--clients", "aiohttp,requests",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert "--clients" in err.decode()
    assert "unknown: requests" in err.decode()
