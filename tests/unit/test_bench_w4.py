"""W4's pure parts: offsets spread over the interval, the ticks listed a chunk at a time while
the tally already counts executions, and what counts as flat memory."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tickwork.bench import w4
from tickwork.bench.record import Execution, Tally
from tickwork.models import idempotency_key

ANCHOR = datetime(2030, 1, 1, tzinfo=UTC)


def test_offsets_spread_evenly_over_the_interval() -> None:
    offsets = [w4.offset_of(i, 4800, 60.0) for i in range(4800)]
    assert offsets[:3] == [0.0, 0.0125, 0.025]
    assert max(offsets) < 60.0
    per_second = [sum(1 for o in offsets if s <= o < s + 1) for s in range(60)]
    assert set(per_second) == {80}  # 4,800 a minute: 80 in every second
    doc = w4.schedule_of(3, 4800, 60.0, ANCHOR, end_at=ANCHOR + timedelta(minutes=5))
    assert doc == {"every": "60s", "start_at": "2030-01-01T00:00:00+00:00", "offset": 0.0375,
                   "end_at": "2030-01-01T00:05:00+00:00"}


async def test_ticks_are_listed_in_chunks_and_early_executions_still_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(w4, "EXPECT_CHUNK", 3)  # seven jobs: three chunks
    ids = [f"job-{i}" for i in range(7)]
    start, end = ANCHOR + timedelta(seconds=60), ANCHOR + timedelta(seconds=180)
    first_tick = start + timedelta(seconds=w4.offset_of(6, 7, 60.0))
    tally = Tally()
    seen = idempotency_key("job-6", first_tick)  # ran before its chunk was listed
    tally.add([Execution(seen, 1, first_tick.timestamp(), first_tick.timestamp() + 0.1, 1)])
    assert (tally.done, tally.unexpected) == (0, 1)
    await w4.expect_ticks(tally, ids, every=60.0, anchor=ANCHOR, start=start, end=end)
    assert len(tally.expected) == 14  # two ticks each in [60 s, 180 s)
    assert (tally.done, tally.unexpected, tally.lost) == (1, 0, 13)
    assert tally.expected[seen] == int(first_tick.timestamp())


@pytest.mark.parametrize(("values", "flat"), [
    ([100, 120, 120, 121, 120, 122, 121, 120, 121, 122], True),  # warm-up, then level
    ([100, 110, 120, 130, 140, 150, 160, 170, 180, 190], False),  # grows all along
])
def test_flatness_ignores_the_warm_up_and_catches_growth(values: list[int],
                                                         flat: bool) -> None:
    figures = w4.flatness(values)
    assert figures["flat"] is flat
    assert (figures["start"], figures["max"], figures["end"]) == (
        values[0], max(values), values[-1])


def test_flatness_of_nothing_says_so() -> None:
    assert w4.flatness([]) == {"flat": None}
