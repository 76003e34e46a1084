"""A queue's backlog bound follows the rate workers read at, measured while it holds."""

from __future__ import annotations

import pytest

from tickwork.scheduler.backlog import BacklogSize


def drive(size: BacklogSize, rate: float, seconds: float, *, held: bool = True,
          start: float = 0.0, step: float = 0.005) -> float:
    """Promote calls every ``step`` for ``seconds``, each moving what workers read at
    ``rate`` since the last; returns the clock at the end."""
    now = start
    while now < start + seconds - 1e-9:
        now += step
        size.observe(round(rate * step), held, now)
    return now


def test_the_bound_settles_at_what_workers_read_in_the_target_time() -> None:
    size = BacklogSize(seconds=0.05, start=500)
    drive(size, rate=2_800, seconds=3)  # a slow host: 500 entries would be 180 ms
    assert size.size == pytest.approx(140, abs=4)
    drive(size, rate=10_000, seconds=3, start=3)  # a fast one
    assert size.size == pytest.approx(500, abs=10)


def test_observe_says_when_the_size_changed() -> None:
    size = BacklogSize(seconds=0.05, start=500, window_seconds=0.25)
    assert size.observe(10, True, 0.0) is False  # the window is open
    assert size.observe(490, True, 0.25) is True  # 2,000/s: halfway to 100
    assert size.size == 300
    assert size.observe(0, False, 0.5) is False  # a window that never held


def test_windows_where_the_bound_never_held_leave_it_alone() -> None:
    size = BacklogSize(seconds=0.05, start=500)
    drive(size, rate=100, seconds=3, held=False)  # a trickle: the streams had room
    assert size.size == 500
    assert size.rate == 0.0


def test_the_bound_stays_within_its_limits() -> None:
    size = BacklogSize(seconds=0.05, least=128, most=2000, start=500)
    drive(size, rate=200, seconds=3)
    assert size.size == 128
    drive(size, rate=1_000_000, seconds=3, start=3, step=0.001)
    assert size.size == 2000


def test_one_slow_window_moves_the_bound_halfway_not_all_the_way() -> None:
    size = BacklogSize(seconds=0.05, start=500, window_seconds=0.25)
    drive(size, rate=2_000, seconds=0.26)  # one window, read at 2,000/s: 100 wanted
    assert size.rate == pytest.approx(2_000, rel=0.05)
    assert size.size == pytest.approx((500 + 100) / 2, abs=10)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"seconds": 0}, "seconds"), ({"least": 0}, "least"), ({"least": 10, "most": 5}, "least"),
    ({"window_seconds": 0}, "window_seconds")])
def test_settings_are_validated(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        BacklogSize(**kwargs)  # type: ignore[arg-type]
