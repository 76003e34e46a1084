"""Reading the record the executed jobs write (``tickwork.bench.jobs``), and its statistics.

The files are read incrementally while the run goes on: each poll reads what was appended
since the last one, complete lines only.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple


class Execution(NamedTuple):
    key: str
    attempt: int
    scheduled: float  # unix seconds
    started: float  # unix seconds, as the job read its own clock
    pid: int


class RecordReader:
    """Tails every ``*.rec`` file of a directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._offsets: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}
        self.pids: set[int] = set()

    def poll(self) -> list[Execution]:
        out: list[Execution] = []
        try:
            names = sorted(n for n in os.listdir(self.directory) if n.endswith(".rec"))
        except FileNotFoundError:
            return out
        for name in names:
            pid = int(name.removesuffix(".rec"))
            path = self.directory / name
            offset = self._offsets.get(name, 0)
            with path.open("rb") as file:
                file.seek(offset)
                data = file.read()
            if not data:
                continue
            self._offsets[name] = offset + len(data)
            data = self._partial.pop(name, b"") + data
            cut = data.rfind(b"\n") + 1
            if cut < len(data):
                self._partial[name] = data[cut:]
            self.pids.add(pid)
            for line in data[:cut].decode().splitlines():
                key, attempt, scheduled, started = line.split("\t")  # instants in us
                out.append(Execution(key, int(attempt), int(scheduled) / 1e6,
                                     int(started) / 1e6, pid))
        return out


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile of already sorted values (None when there are none)."""
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def lateness_summary(values: Iterable[float]) -> dict[str, float | None]:
    """p50, p99 and max, in seconds."""
    ordered = sorted(values)
    return {"p50": percentile(ordered, 50), "p99": percentile(ordered, 99),
            "max": ordered[-1] if ordered else None}


@dataclass
class Tally:
    """What ran, of what was expected: the first execution of each key, and repeats.

    ``expected`` maps each key to a group (a minute of W2, a tick of W3, or one group);
    executions of keys not expected (warm-up jobs, ticks outside the window) are counted
    apart and otherwise ignored.
    """

    expected: dict[str, int] = field(default_factory=dict)
    first: dict[str, Execution] = field(default_factory=dict)
    duplicated: int = 0  # executions beyond the first of a key (a retry or a re-delivery)
    retried: int = 0  # of those, executions with attempt > 1
    early: int = 0  # started before scheduled_at
    strays: list[Execution] = field(default_factory=list)  # keys not (yet) expected
    last_started: float = 0.0

    @property
    def unexpected(self) -> int:
        return len(self.strays)

    def expect(self, keys: dict[str, int]) -> None:
        """Expect more keys (jobs created while the run goes on); strays that now match count."""
        self.expected.update(keys)
        strays, self.strays = self.strays, []
        self.add(strays)

    def add(self, executions: Iterable[Execution]) -> None:
        for e in executions:
            if e.key not in self.expected:
                self.strays.append(e)
                continue
            if e.started < e.scheduled:
                self.early += 1
            if e.key in self.first:
                self.duplicated += 1
                if e.attempt > 1:
                    self.retried += 1
            else:
                self.first[e.key] = e
            self.last_started = max(self.last_started, e.started)

    @property
    def done(self) -> int:
        return len(self.first)

    @property
    def lost(self) -> int:
        return len(self.expected) - len(self.first)

    def lateness(self, group: int | None = None) -> list[float]:
        if group is None:
            return [e.started - e.scheduled for e in self.first.values()]
        return [e.started - e.scheduled for k, e in self.first.items()
                if self.expected[k] == group]

    def by_group(self) -> dict[int, tuple[int, int, list[float]]]:
        """group -> (expected, executed, lateness of the first executions)."""
        out: dict[int, tuple[int, int, list[float]]] = {}
        counts: dict[int, int] = {}
        for group in self.expected.values():
            counts[group] = counts.get(group, 0) + 1
        late: dict[int, list[float]] = {g: [] for g in counts}
        for key, e in self.first.items():
            late[self.expected[key]].append(e.started - e.scheduled)
        for group, n in sorted(counts.items()):
            out[group] = (n, len(late[group]), late[group])
        return out


def lateness_series(tally: Tally, t0: float) -> list[dict[str, Any]]:
    """Lateness percentiles per real second of scheduled time, for ``report.svg_plot``."""
    buckets: dict[int, list[float]] = {}
    for e in tally.first.values():
        buckets.setdefault(int(e.scheduled - t0), []).append(e.started - e.scheduled)
    out = []
    for second in sorted(buckets):
        ordered = sorted(buckets[second])
        out.append({"t": second, "n": len(ordered), "p50": round(ordered[len(ordered) // 2], 4),
                    "p99": round(percentile(ordered, 99) or 0.0, 4),
                    "max": round(ordered[-1], 4)})
    return out
