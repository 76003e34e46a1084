"""``"offset": "auto"``: interval jobs spread over their interval by a hash of their id.

Properties: the offset is stable (the same id, the same offset), within ``[0, every)``, spread
evenly across ids, and a job's fire times never come before the grid points of its interval.
Then the document, the store, the client and the planner carry it end to end.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.client import AsyncClient
from tickwork.clock import FakeClock
from tickwork.document import job_document, parse_job_document
from tickwork.drivers.base import JobCreateParams, OccurrenceListParams, Store
from tickwork.errors import ValidationError
from tickwork.models import ScheduleSpec
from tickwork.scheduler.planner import Planner
from tickwork.schedules import EverySchedule, auto_offset, compile_schedule, for_job
from tickwork.testing.factories import NOW, job_spec, seconds

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
AUTO_MINUTE = ScheduleSpec(type="every", every_seconds=60, offset_auto=True)
job_ids = st.text(min_size=1, max_size=40)
intervals = st.sampled_from([0.5, 1, 10, 60, 90, 3600, 86_400, 7 * 86_400])
instants = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1),
                        timezones=st.just(UTC))


@settings(max_examples=300, deadline=None)
@given(job_ids, intervals)
def test_the_offset_is_stable_and_within_the_interval(job_id: str, every: float) -> None:
    offset = auto_offset(job_id, every)
    assert offset == auto_offset(job_id, every)
    assert 0 <= offset < every


@settings(max_examples=200, deadline=None)
@given(job_ids, intervals, instants)
def test_fire_times_are_never_early_and_one_interval_apart(job_id: str, every: float,
                                                           after: datetime) -> None:
    """Each fire time lies at its grid point plus the job's offset, never before the grid
    point and never before the instant asked about; consecutive fires are one interval apart."""
    schedule = for_job(compile_schedule(
        ScheduleSpec(type="every", every_seconds=every, offset_auto=True)), job_id)
    first = schedule.first_at_or_after(after)
    assert first is not None
    assert first >= after
    interval = timedelta(seconds=every)
    grid = EPOCH + ((first - EPOCH) // interval) * interval
    assert timedelta(0) <= first - grid < interval
    assert first - grid == timedelta(seconds=auto_offset(job_id, every))
    second = schedule.next_after(first)
    assert second is not None
    assert second - first == interval


def test_a_million_minute_jobs_would_spread_evenly_over_the_minute() -> None:
    """60,000 ids into 60 one-second buckets: each holds 1,000 give or take 15 %, so a
    minute's worth of jobs does not fire at :00."""
    buckets = Counter(int(auto_offset(f"job-{i}", 60)) for i in range(60_000))
    assert len(buckets) == 60
    assert min(buckets.values()) > 850
    assert max(buckets.values()) < 1150


def test_offsets_have_millisecond_steps_over_a_second_and_microseconds_below() -> None:
    steps = [auto_offset(f"j{i}", 60) * 1000 for i in range(200)]
    assert all(abs(step - round(step)) < 1e-6 for step in steps)
    below = [auto_offset(f"j{i}", 0.01) for i in range(200)]
    assert all(0 <= o < 0.01 for o in below)
    assert len(set(below)) > 150  # microsecond steps: 10,000 values to fall on


def test_the_description_says_auto_and_then_the_jobs_own_offset() -> None:
    schedule = compile_schedule(AUTO_MINUTE)
    assert schedule.describe() == "every minute (offset auto)"
    own = for_job(schedule, "nightly")
    assert isinstance(own, EverySchedule)
    assert own.describe() == f"every minute (offset {auto_offset('nightly', 60):g} seconds, auto)"
    cron = compile_schedule(ScheduleSpec(type="cron", cron="* * * * *"))
    assert for_job(cron, "nightly") is cron


def test_the_document_reads_and_writes_auto() -> None:
    doc = {"name": "spread", "kind": "http", "payload": {"url": "https://example.org/"},
           "schedule": {"every": "1m", "offset": "auto"}}
    spec = parse_job_document(doc).spec
    assert spec.schedule == AUTO_MINUTE
    assert job_document(spec)["schedule"] == {"every": 60, "offset": "auto"}
    assert parse_job_document(job_document(spec)).spec == spec


@pytest.mark.parametrize(("schedule", "field", "words"), [
    ({"every": "1m", "offset": "automatic"}, "schedule.offset", "or 'auto'"),
    ({"every": "1m", "offset": "AUTO"}, "schedule.offset", "or 'auto'"),
    ({"every": "1m", "offset": -1}, "schedule.offset", "must be at least 0"),
    ({"cron": "* * * * *", "offset": "auto"}, "schedule.offset", "only applies to 'every'"),
    ({"every": "1m", "offset": "auto", "exclude": ["holidays"]}, "schedule.offset",
     "without 'exclude' or 'only'"),
])
def test_bad_offsets_name_the_field(schedule: dict[str, object], field: str,
                                    words: str) -> None:
    doc = {"name": "spread", "kind": "http", "payload": {"url": "https://example.org/"},
           "schedule": schedule}
    with pytest.raises(ValidationError) as caught:
        parse_job_document(doc)
    assert caught.value.field == field
    assert words in caught.value.reason


def test_a_spec_with_both_an_offset_and_auto_is_refused() -> None:
    with pytest.raises(ValidationError, match="not both"):
        compile_schedule(ScheduleSpec(type="every", every_seconds=60, offset_seconds=5,
                                      offset_auto=True))


@pytest.fixture
def store(each_store: Store) -> Store:
    """Both stores (conftest's each_store): each writes the automatic offset with the job
    and reads it back."""
    return each_store


async def test_created_jobs_keep_auto_and_plan_at_their_own_offset(store: Store) -> None:
    """One job created alone and 50 in bulk: each reads back with ``offset_auto``, its next
    run is its own offset's, and the planner inserts occurrences at exactly those times."""
    clock = FakeClock(NOW + seconds(0.5))
    client = AsyncClient(store, clock=clock)
    jobs = [await client.create_job(job_spec("alone", schedule=AUTO_MINUTE))]
    jobs += await client.create_jobs(
        [job_spec(f"bulk-{i}", schedule=AUTO_MINUTE) for i in range(50)])
    assert len({job.next_run_at for job in jobs}) > 40  # spread, not all at one instant
    for job in jobs:
        stored = await store.job_get(job.id)
        assert stored.spec.schedule.offset_auto
        own = for_job(compile_schedule(AUTO_MINUTE), job.id)
        assert stored.next_run_at == own.first_at_or_after(clock.now())
    planner = Planner(store=store, clock=clock, horizon_seconds=120)
    while (await planner.run_once(clock.now()))[1]:
        pass
    for job in jobs:
        found = await store.occurrence_list(OccurrenceListParams(job_id=job.id,
                                                                 newest_first=False))
        own = for_job(compile_schedule(AUTO_MINUTE), job.id)
        expected = [own.first_at_or_after(clock.now())]
        expected.append(own.next_after(expected[0]))
        assert [o.scheduled_at for o in found][:2] == expected
        assert all(o.scheduled_at >= clock.now() for o in found)


async def test_a_next_run_stored_without_the_offset_moves_on_to_it(store: Store) -> None:
    """A job written with the grid point as its next run (no id known when it was
    computed) is planned at its own offset, never earlier."""
    clock = FakeClock(NOW)
    job = await store.job_create(JobCreateParams(
        spec=job_spec("late-id", schedule=AUTO_MINUTE), next_run_at=NOW, now=NOW))
    assert auto_offset(job.id, 60) > 0
    planner = Planner(store=store, clock=clock, horizon_seconds=120)
    await planner.run_once(clock.now())
    found = await store.occurrence_list(OccurrenceListParams(job_id=job.id, newest_first=False))
    offset = timedelta(seconds=auto_offset(job.id, 60))
    assert next(o.scheduled_at for o in found) == NOW + offset
