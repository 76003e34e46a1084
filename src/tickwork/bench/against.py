"""W1 against a peer, in one session: the peer's run and tickwork's, interleaved, and the ratio.

The peer is a script that runs the same burst (``--n`` jobs due at one instant, 2 worker
processes) and prints a line holding ``RESULT {json}`` with ``throughput`` (jobs/s from T to the
last start), ``create_rate``, ``lost`` and ``dup`` (``../shared/peers/pgqueuer-w1`` does).
Rounds alternate, peer first, so both see the machine as it is in that minute; the ratio is
of the medians.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from tickwork.errors import TickworkError

PEER_TIMEOUT_SECONDS = 900.0


class PeerFailed(TickworkError):
    """The peer's script did not print a RESULT line."""


async def run_peer(script: Path, jobs: int) -> dict[str, Any]:
    """One run of the peer's script; its RESULT figures."""
    proc = await asyncio.create_subprocess_exec(
        str(script), "--n", str(jobs), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), PEER_TIMEOUT_SECONDS)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise PeerFailed(f"{script} ran longer than {PEER_TIMEOUT_SECONDS:.0f}s") from None
    text = out.decode(errors="replace")
    for line in text.splitlines():
        _, found, rest = line.partition("RESULT {")  # after a "[time peer] " prefix, if any
        if found:
            result: dict[str, Any] = json.loads("{" + rest)
            return result
    raise PeerFailed(f"{script} printed no RESULT line (exit {proc.returncode}): "
                     f"{text.strip()[-500:]}")


async def interleaved(rounds: int, peer: Callable[[], Awaitable[dict[str, Any]]],
                      ours: Callable[[], Awaitable[dict[str, Any]]],
                      say: Callable[[str], None]) -> dict[str, Any]:
    """``rounds`` of the peer's run then ours, and the ratios of the medians."""
    runs: list[dict[str, Any]] = []
    for n in range(1, rounds + 1):
        say(f"round {n} of {rounds}: the peer")
        theirs = await peer()
        say(f"round {n} of {rounds}: tickwork")
        runs.append({"peer": theirs, "tickwork": await ours()})
    return {"rounds": runs, **ratios(runs)}


def ratios(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(values: list[object]) -> float | None:
        numbers = [n for n in map(_number, values) if n is not None]
        return statistics.median(numbers) if numbers else None

    drain = (median([r["tickwork"].get("throughput_per_second") for r in runs]),
             median([r["peer"].get("throughput") for r in runs]))
    creation = (median([_creation(r["tickwork"]) for r in runs]),
                median([r["peer"].get("create_rate") for r in runs]))
    return {
        "drain_per_second": {"tickwork": drain[0], "peer": drain[1],
                             "ratio": _ratio(*drain)},
        "creation_per_second": {"tickwork": creation[0], "peer": creation[1],
                                "ratio": _ratio(*creation)},
        "ok": all(r["tickwork"].get("ok") and not r["peer"].get("lost")
                  and not r["peer"].get("dup") for r in runs),
    }


def _creation(result: dict[str, Any]) -> object:
    return (result.get("creation") or {}).get("jobs_per_second")


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return None if not ours or not theirs else round(ours / theirs, 2)


def table(result: dict[str, Any]) -> str:
    """The rounds, each with its own drain ratio and the host's ``calibration_ms`` (the host's
    speed can change from one round to the next), then the ratios of the medians."""
    lines = ["round  peer drain/s  tickwork drain/s  ratio  peer create/s  tickwork create/s"
             "  calibration_ms"]
    for n, r in enumerate(result["rounds"], 1):
        p, t = r["peer"], r["tickwork"]
        ratio = _ratio(_number(t.get("throughput_per_second")), _number(p.get("throughput")))
        calibration = (t.get("machine") or {}).get("calibration_ms")
        lines.append(f"{n:>5}  {_num(p.get('throughput')):>12}  "
                     f"{_num(t.get('throughput_per_second')):>16}  "
                     f"{'-' if ratio is None else f'{ratio:.2f}':>5}  "
                     f"{_num(p.get('create_rate')):>13}  {_num(_creation(t)):>17}  "
                     f"{'-' if calibration is None else calibration:>14}")
    d, c = result["drain_per_second"], result["creation_per_second"]
    lines.append(f"median drain: tickwork {_num(d['tickwork'])}/s, peer {_num(d['peer'])}/s, "
                 f"ratio {d['ratio']}")
    lines.append(f"median creation: tickwork {_num(c['tickwork'])}/s, peer {_num(c['peer'])}/s, "
                 f"ratio {c['ratio']}")
    lines.append("lost, duplicated, early: none" if result["ok"] else
                 "SOMETHING WAS LOST, DUPLICATED OR EARLY: see the JSON (--json)")
    return "\n".join(lines) + "\n"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _num(value: object) -> str:
    return f"{value:,.0f}" if isinstance(value, int | float) else "-"
