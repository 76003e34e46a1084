"""The store CPU comparison drains both databases and leaves none behind."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg

from tickwork.bench.storecpu import SIDES, compare, process_seconds
from tickwork.testing.postgres import admin_url, require_server

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_process_seconds_reads_past_a_command_with_spaces() -> None:
    fields = ["S"] + ["0"] * 10 + ["250", "150"] + ["0"] * 30
    line = f"4242 (postgres: a (b) c) {' '.join(fields)}"
    assert process_seconds(line) == 400 / os.sysconf("SC_CLK_TCK")


async def test_both_schemas_drain_every_run() -> None:
    require_server()
    result = await compare(admin_url(), SRC, 600)
    assert {side: done for side, (done, _) in result.items()} == dict.fromkeys(SIDES, 600)
    assert all(seconds >= 0 for _, seconds in result.values())
    with psycopg.connect(admin_url(), autocommit=True) as conn:
        left = conn.execute("SELECT datname FROM pg_database "
                            "WHERE datname LIKE 'tickwork_storecpu_%'").fetchall()
    assert left == []
