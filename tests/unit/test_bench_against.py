"""tickwork bench w1 --against: a peer's script run and parsed, and the ratio of the medians."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from tickwork.bench.against import PeerFailed, interleaved, ratios, run_peer, table


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "peer"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


async def test_the_peers_result_line_is_read(tmp_path: Path) -> None:
    peer = script(tmp_path, 'echo "noise"; echo "[12:00:00 peer] RESULT {\\"throughput\\": 5000.5, '
                            '\\"create_rate\\": 30000, \\"n\\": $2, \\"lost\\": 0, \\"dup\\": 0}"')
    result = await run_peer(peer, 1234)
    assert result == {"throughput": 5000.5, "create_rate": 30000, "n": 1234, "lost": 0, "dup": 0}


async def test_a_peer_without_a_result_says_why(tmp_path: Path) -> None:
    peer = script(tmp_path, 'echo "could not install pgqueuer"; exit 1')
    with pytest.raises(PeerFailed, match=r"no RESULT line .exit 1.: could not install pgqueuer"):
        await run_peer(peer, 10)


def ours(drain: float, create: float, ok: bool = True) -> dict[str, Any]:
    return {"throughput_per_second": drain, "creation": {"jobs_per_second": create}, "ok": ok}


def peer(drain: float, create: float, lost: int = 0) -> dict[str, Any]:
    return {"throughput": drain, "create_rate": create, "lost": lost, "dup": 0}


def test_the_ratio_is_of_the_medians() -> None:
    runs = [{"peer": peer(5000, 30000), "tickwork": ours(12000, 70000)},
            {"peer": peer(7000, 40000), "tickwork": ours(10000, 50000)},
            {"peer": peer(6000, 35000), "tickwork": ours(9000, 80000)}]
    result = ratios(runs)
    assert result["drain_per_second"] == {"tickwork": 10000, "peer": 6000, "ratio": 1.67}
    assert result["creation_per_second"]["ratio"] == 2.0
    assert result["ok"]
    assert "ratio 1.67" in table({"rounds": runs, **result})


def test_each_round_shows_its_own_ratio_and_the_hosts_calibration() -> None:
    runs = [{"peer": peer(5000, 30000),
             "tickwork": {**ours(12000, 70000), "machine": {"calibration_ms": 12.5}}},
            {"peer": peer(8000, 40000), "tickwork": ours(10000, 50000)}]
    rows = table({"rounds": runs, **ratios(runs)}).splitlines()
    assert "calibration_ms" in rows[0]
    assert rows[1].split()[0:4] == ["1", "5,000", "12,000", "2.40"]
    assert rows[1].split()[-1] == "12.5"
    assert rows[2].split()[3] == "1.25"
    assert rows[2].split()[-1] == "-"  # a round without the figure says so


def test_a_loss_on_either_side_is_not_ok() -> None:
    assert not ratios([{"peer": peer(1, 1, lost=3), "tickwork": ours(2, 2)}])["ok"]
    assert not ratios([{"peer": peer(1, 1), "tickwork": ours(2, 2, ok=False)}])["ok"]


async def test_rounds_alternate_peer_first() -> None:
    order: list[str] = []

    async def run_peer_side() -> dict[str, Any]:
        order.append("peer")
        return peer(1, 1)

    async def run_ours() -> dict[str, Any]:
        order.append("tickwork")
        return ours(2, 2)

    result = await interleaved(2, run_peer_side, run_ours, lambda _: None)
    assert order == ["peer", "tickwork", "peer", "tickwork"]
    assert result["drain_per_second"]["ratio"] == 2.0
