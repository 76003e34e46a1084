"""Every bench run reports how fast its machine runs the interpreter."""

from __future__ import annotations

import pytest

from tickwork.bench import calibrate
from tickwork.bench.runner import machine


def test_the_calibration_times_the_fixed_work_and_reports_its_best_try(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([0.0, 0.030, 1.0, 1.012, 2.0, 2.020])
    monkeypatch.setattr(calibrate.time, "perf_counter", lambda: next(ticks))
    assert calibrate.calibration_ms(tries=3) == 12.0


def test_the_machine_figures_carry_a_calibration() -> None:
    figures = machine()
    assert figures["cpus"] >= 1
    assert 0 < figures["calibration_ms"] < 60_000
