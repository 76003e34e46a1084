"""The bench's profiler charges a function for the CPU spent in it, not for the wall clock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MODULE = '''
import time

def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def nap(seconds):
    time.sleep(seconds)

spin(0.4)
nap(0.4)
'''


def test_the_profile_charges_cpu_not_sleep(tmp_path: Path) -> None:
    (tmp_path / "burner.py").write_text(MODULE)
    out = tmp_path / "burner.prof"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "tickwork.bench.cpuprofile", str(out), "-m", "burner"],
                   check=True, env=env, timeout=60)
    stacks = {}
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        stacks[stack] = int(count)
    total = sum(stacks.values())
    spin = sum(n for s, n in stacks.items() if s.split(";")[-1].startswith("spin ("))
    nap = sum(n for s, n in stacks.items() if "nap (" in s)
    assert total >= 20, "about one sample per millisecond of CPU (timer granularity allowing)"
    assert spin / total > 0.8, stacks
    assert nap <= 2, "a sleeping function costs no CPU, whatever the wall clock says"
    top = (tmp_path / "burner.prof.top").read_text()
    assert "spin (" in top


def test_usage_is_explained() -> None:
    r = subprocess.run([sys.executable, "-m", "tickwork.bench.cpuprofile", "x"],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode != 0
    assert "usage: python -m tickwork.bench.cpuprofile OUT -m MODULE" in r.stderr
