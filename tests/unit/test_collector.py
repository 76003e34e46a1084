"""A started process looks for reference cycles less often than CPython's default and leaves
what it made to start out of every later collection (runtime/base.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tickwork.runtime.base import YOUNG_OBJECTS_PER_COLLECTION, collect_less_often


@pytest.fixture
def collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_started_the_young_objects_are_collected_less_often(collector: None) -> None:
    assert gc.get_threshold()[0] < YOUNG_OBJECTS_PER_COLLECTION
    collect_less_often()
    assert gc.get_threshold()[0] == YOUNG_OBJECTS_PER_COLLECTION


def test_started_what_the_start_made_is_left_out_of_collections(collector: None) -> None:
    made_at_start: list[int] = []
    assert any(o is made_at_start for o in gc.get_objects())
    collect_less_often()
    assert not any(o is made_at_start for o in gc.get_objects())  # frozen: never looked at
