"""CPU seconds spent by each kind of process, read from ``/proc``: the bench's own processes,
and the PostgreSQL backends serving its database when the server runs on this machine.

Wall-clock figures move with whatever else the machine is doing; CPU per job moves much less,
so it is what tells whether a change made the hot path cheaper.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` (its threads included), or None if it is gone or unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def snapshot(pids: Mapping[str, Iterable[int]]) -> dict[str, dict[int, float]]:
    """kind -> pid -> CPU seconds so far."""
    out: dict[str, dict[int, float]] = {}
    for kind, group in pids.items():
        for pid in group:
            seconds = cpu_seconds(pid)
            if seconds is not None:
                out.setdefault(kind, {})[pid] = seconds
    return out


def spent(before: Mapping[str, Mapping[int, float]],
          after: Mapping[str, Mapping[int, float]]) -> dict[str, float]:
    """CPU seconds per kind between two snapshots; a process first seen in ``after`` (a new
    backend) counts from zero."""
    out: dict[str, float] = {}
    for kind, now in after.items():
        was = before.get(kind, {})
        out[kind] = round(sum(s - was.get(pid, 0.0) for pid, s in now.items()), 2)
    return out
