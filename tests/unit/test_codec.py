"""The stored form of a spec: exactly json.dumps of its dict form, however it is assembled."""

from __future__ import annotations

import json
import math
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickwork.drivers.codec import (
    new_job_id,
    new_job_ids,
    spec_from_json,
    spec_to_json,
    specs_to_json,
)
from tickwork.models import Delivery, JobSpec, Overlap, RetryPolicy, ScheduleSpec

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(spec: JobSpec) -> str:
    """What spec_to_json wrote when it was one json.dumps of a dict."""
    s, r = spec.schedule, spec.retry
    return json.dumps({
        "name": spec.name,
        "schedule": {
            "type": s.type, "at": s.at.isoformat() if s.at else None, "cron": s.cron,
            "timezone": s.timezone, "every_seconds": s.every_seconds,
            "offset_seconds": s.offset_seconds,
            "start_at": s.start_at.isoformat() if s.start_at else None,
            "end_at": s.end_at.isoformat() if s.end_at else None,
            "jitter_seconds": s.jitter_seconds,
        },
        "kind": spec.kind,
        "payload": spec.payload,
        "queue": spec.queue,
        "priority": spec.priority,
        "retry": {"max_attempts": r.max_attempts, "backoff_base_seconds": r.backoff_base_seconds,
                  "backoff_max_seconds": r.backoff_max_seconds, "jitter": r.jitter},
        "timeout_seconds": spec.timeout_seconds,
        "overlap": spec.overlap.value,
        "catchup_window_seconds": spec.catchup_window_seconds,
        "paused": spec.paused,
        "tags": list(spec.tags),
        "delivery": spec.delivery.value,
    }, separators=(",", ":"))


# Numbers of every type a caller may put in a spec, including the ones that are equal as keys
# but written differently (1, 1.0 and true; 0.0 and -0.0) and the ones JSON has no words for.
numbers = st.sampled_from([0, 1, 30, 0.0, -0.0, 1.0, 30.0, 2.5, 1e300, 10**20, True, False,
                           math.inf, -math.inf, math.nan])
texts = st.text(max_size=12)
BERLIN_WINTER = timezone(timedelta(hours=1))
instants = st.sampled_from([None, datetime(2030, 1, 1, tzinfo=UTC),
                            datetime(2030, 1, 1, 10, 0, 0, 250, tzinfo=BERLIN_WINTER)])
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | texts,
                           lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(texts, inner, max_size=3), max_leaves=8)
schedules = st.builds(ScheduleSpec, type=st.sampled_from(["at", "cron", "every"]), at=instants,
                      cron=st.none() | texts, timezone=texts, every_seconds=st.none() | numbers,
                      offset_seconds=numbers, start_at=instants, end_at=instants,
                      jitter_seconds=numbers)
retries = st.builds(RetryPolicy, max_attempts=numbers, backoff_base_seconds=numbers,
                    backoff_max_seconds=numbers, jitter=st.sampled_from(["full", "none"]) | texts)
specs = st.builds(JobSpec, name=texts, schedule=schedules, kind=texts,
                  payload=st.dictionaries(texts, json_values, max_size=3), queue=texts,
                  priority=numbers, retry=retries, timeout_seconds=numbers,
                  overlap=st.sampled_from(list(Overlap)), catchup_window_seconds=numbers,
                  paused=st.booleans() | st.sampled_from([0, 1]),
                  tags=st.lists(texts, max_size=3).map(tuple),
                  delivery=st.sampled_from(list(Delivery)))


@FAST
@given(spec=specs)
def test_a_spec_is_written_as_json_dumps_writes_it(spec: JobSpec) -> None:
    assert spec_to_json(spec) == reference(spec)


@FAST
@given(batch=st.lists(specs, min_size=1, max_size=6), data=st.data())
def test_many_specs_sharing_schedules_and_payloads_are_written_each_as_alone(
        batch: list[JobSpec], data: st.DataObject) -> None:
    # Bulk creation hands out one schedule and payload object per distinct one: share some.
    shared = [JobSpec(**{**{f: getattr(s, f) for f in s.__slots__},
                         "schedule": batch[0].schedule,
                         "payload": data.draw(st.sampled_from([batch[0].payload, s.payload]))})
              for s in batch]
    everything = batch + shared + batch
    assert list(specs_to_json(everything)) == [reference(s) for s in everything]


def test_what_parsing_gives_is_remembered_and_still_written_exactly() -> None:
    base = JobSpec(name="a", schedule=ScheduleSpec(type="every", every_seconds=60.0),
                   kind="http", payload={"url": "https://example.org"})
    variants = [base, JobSpec(**{**{f: getattr(base, f) for f in base.__slots__},
                                 "catchup_window_seconds": 0.0}),
                JobSpec(**{**{f: getattr(base, f) for f in base.__slots__},
                           "catchup_window_seconds": -0.0}),
                JobSpec(**{**{f: getattr(base, f) for f in base.__slots__},
                           "timeout_seconds": 30}),
                JobSpec(**{**{f: getattr(base, f) for f in base.__slots__},
                           "retry": RetryPolicy(backoff_base_seconds=2)}),
                JobSpec(**{**{f: getattr(base, f) for f in base.__slots__}, "tags": (1,)}),
                JobSpec(**{**{f: getattr(base, f) for f in base.__slots__}, "tags": (True,)})]
    for spec in variants * 2:
        assert spec_to_json(spec) == reference(spec)
        assert spec_from_json(spec_to_json(spec)) == spec


@FAST
@given(names=st.lists(st.text(alphabet=st.sampled_from('ab",:{}\\\u00e9\n'), max_size=16),
                      min_size=1, max_size=5))
def test_specs_that_differ_only_in_name_are_parsed_once_and_keep_their_names(
        names: list[str]) -> None:
    base = JobSpec(name="x", schedule=ScheduleSpec(type="at", at=datetime(2030, 1, 1, tzinfo=UTC)),
                   kind="python", payload={"callable": "m:f", "kwargs": {"n": 1}})
    parsed = [spec_from_json(spec_to_json(JobSpec(**{**{f: getattr(base, f)
                                                         for f in base.__slots__}, "name": n})))
              for n in names + names]
    assert [p.name for p in parsed] == names + names
    assert all(p == JobSpec(**{**{f: getattr(base, f) for f in base.__slots__}, "name": p.name})
               for p in parsed)
    # Parsed once: every one shares the first one's payload (the executors' memos key on it).
    assert all(p.payload is parsed[0].payload for p in parsed)


def test_spec_text_of_another_shape_is_parsed_whole() -> None:
    spec = JobSpec(name="n", schedule=ScheduleSpec(type="every", every_seconds=60.0),
                   kind="http", payload={"url": "https://example.org"})
    d = json.loads(spec_to_json(spec))
    reordered = json.dumps({"kind": d["kind"], **d})
    spaced = json.dumps(d, separators=(", ", ": "))
    for text in (reordered, spaced):
        assert spec_from_json(text) == spec


def test_a_payload_that_contains_itself_is_refused_as_json_refuses_it() -> None:
    payload: dict[str, Any] = {}
    payload["self"] = payload
    spec = JobSpec(name="a", schedule=ScheduleSpec(type="every", every_seconds=60.0),
                   kind="http", payload=payload)
    with pytest.raises(ValueError, match="Circular reference"):
        spec_to_json(spec)


def test_new_job_ids_are_version_7_uuids_in_hex_that_start_with_the_time() -> None:
    before = time.time_ns() // 1_000_000
    ids = new_job_ids(2000)
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == 2000
    for job_id in ids:
        parsed = uuid.UUID(hex=job_id)
        assert (parsed.hex, parsed.version, parsed.variant) == (job_id, 7, uuid.RFC_4122)
        assert before <= int(job_id[:12], 16) <= after  # ms: ids made together sort together
    assert len({job_id[12:] for job_id in ids}) == 2000  # and differ in their random bits
    assert new_job_ids(0) == []
    assert uuid.UUID(hex=new_job_id()).version == 7
