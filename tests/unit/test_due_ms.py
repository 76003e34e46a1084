"""Due-set scores never come before the instant they stand for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from tickwork.drivers.base import NewOccurrence
from tickwork.drivers.dispatch import due_item, due_ms, to_ms
from tickwork.models import OccurrenceState, Trigger

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
instants = st.datetimes(min_value=datetime(1960, 1, 1), max_value=datetime(2200, 1, 1),
                        timezones=st.just(UTC))


@given(when=instants)
def test_a_due_score_is_the_first_whole_millisecond_at_or_after_the_instant(
        when: datetime) -> None:
    score = due_ms(when)
    assert EPOCH + timedelta(milliseconds=score) >= when
    assert EPOCH + timedelta(milliseconds=score - 1) < when


def test_an_occurrence_due_between_milliseconds_is_promoted_after_its_instant() -> None:
    # Promoted at the floor (…000 ms), a claim still found it not due and re-armed it a
    # second later: the 1 s late jobs of W2 on PostgreSQL + Redis.
    due = datetime(2030, 1, 1, 9, 0, 0, 700, tzinfo=UTC)
    item = due_item(NewOccurrence(job_id="j", scheduled_at=due, due_at=due, queue="default",
                                  priority=0, state=OccurrenceState.SCHEDULED, max_attempts=3,
                                  trigger=Trigger.SCHEDULE))
    assert item.due_ms == to_ms(due) + 1
