"""Run a module under a CPU-time sampling profiler: ``python -m tickwork.bench.cpuprofile OUT
-m MODULE ARGS...``.

Every millisecond of the process's CPU time (``ITIMER_PROF``), the stack of the main thread is
recorded; at exit, OUT holds one line per distinct stack, ``frame;frame;... COUNT`` (the
collapsed format flame graph tools read), and ``OUT.top`` the functions by share of samples,
inclusive and exclusive. Unlike ``python -m cProfile``, which times by the wall clock and adds a
clock read to every call, this charges each function only for the CPU this process spent in
it, and costs the process about a percent: on a saturated machine it is what tells where the
time of a hot path goes.
"""

from __future__ import annotations

import runpy
import signal
import sys
from collections import Counter
from pathlib import Path
from types import FrameType

INTERVAL_SECONDS = 0.001


class Sampler:
    def __init__(self) -> None:
        self.stacks: Counter[tuple[str, ...]] = Counter()

    def start(self) -> None:
        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, INTERVAL_SECONDS, INTERVAL_SECONDS)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)

    def _sample(self, signum: int, frame: FrameType | None) -> None:
        names = []
        while frame is not None:
            code = frame.f_code
            names.append(f"{code.co_name} ({_short(code.co_filename)}:{code.co_firstlineno})")
            frame = frame.f_back
        self.stacks[tuple(reversed(names))] += 1

    def write(self, out: Path) -> None:
        total = sum(self.stacks.values()) or 1
        with out.open("w") as f:
            for stack, count in self.stacks.most_common():
                f.write(f"{';'.join(stack)} {count}\n")
        inclusive: Counter[str] = Counter()
        exclusive: Counter[str] = Counter()
        for stack, count in self.stacks.items():
            for name in set(stack):
                inclusive[name] += count
            if stack:
                exclusive[stack[-1]] += count
        with out.with_suffix(out.suffix + ".top").open("w") as f:
            f.write(f"{total} samples of {INTERVAL_SECONDS * 1000:g} ms CPU\n\n")
            f.write("inclusive %   exclusive %   function\n")
            for name, count in inclusive.most_common(120):
                f.write(f"{100 * count / total:11.1f}   {100 * exclusive[name] / total:11.1f}"
                        f"   {name}\n")


def _short(path: str) -> str:
    for marker in ("site-packages/", "/src/", "/lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "-m":
        sys.exit("usage: python -m tickwork.bench.cpuprofile OUT -m MODULE [ARGS...]")
    out, module, rest = Path(argv[0]), argv[2], argv[3:]
    sys.argv = [module, *rest]
    sampler = Sampler()
    sampler.start()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sampler.stop()
        sampler.write(out)


if __name__ == "__main__":
    main(sys.argv[1:])
