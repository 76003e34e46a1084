"""The job document: round trips, defaults, warnings (its rejections: test_document_rejections)."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tickwork.document import (
    BulkParser,
    job_document,
    parse_instant,
    parse_job_document,
    parse_job_spec,
)
from tickwork.errors import ValidationError
from tickwork.models import Delivery, JobSpec, Overlap, RetryPolicy, ScheduleSpec
from tickwork.retry import worst_case_retry_span

BASE: dict[str, Any] = {
    "name": "ping",
    "schedule": {"every": "1h"},
    "kind": "http",
    "payload": {"url": "https://example.org/hook"},
}

FULL: dict[str, Any] = {
    "name": "nightly-report",
    "queue": "default",
    "priority": 0,
    "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Berlin"},
    "kind": "http",
    "payload": {"method": "POST", "url": "https://example.org/hook", "headers": {},
                "body": {"a": 1}},
    "retry": {"max_attempts": 3, "backoff_base_seconds": 2, "backoff_max_seconds": 300,
              "jitter": "full"},
    "timeout_seconds": 30,
    "overlap": "skip",
    "catchup_window_seconds": 3600,
    "paused": False,
    "tags": ["reports"],
    "delivery": "at_least_once",
    "on_success": [],
    "on_failure": [],
    "on_dead": [],
}

OFFSET = "must include a UTC offset, e.g. 2030-01-01T09:00:00Z"


def doc(**changes: Any) -> dict[str, Any]:
    """BASE with fields replaced; a value of ... removes the field."""
    out = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is ...:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def rejection(document: object, **kwargs: Any) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        parse_job_document(document, **kwargs)
    return info.value


def fmt(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:.3f}".rstrip("0.")


# --- remembered values: a bulk parse and the parse caches -----------------------------------


@pytest.mark.parametrize(("good", "bad", "field"), [
    ({"schedule": {"every": 1}}, {"schedule": {"every": True}}, "schedule.every"),
    ({"schedule": {"every": 60, "offset": 0}}, {"schedule": {"every": 60, "offset": False}},
     "schedule.offset"),
    ({"retry": {"max_attempts": 1}}, {"retry": {"max_attempts": True}}, "retry.max_attempts"),
    ({"schedule": {"cron": "* * * * *"}}, {"schedule": {"cron": "* * * * *\x00"}},
     "schedule.cron"),
    ({"payload": {"url": "https://example.org", "body": {"1": "a"}}},
     {"payload": {"url": "https://example.org", "body": {1: "a"}}}, "payload.body"),
])
def test_a_remembered_value_is_not_mistaken_for_an_equal_one_of_another_type(
        good: dict[str, Any], bad: dict[str, Any], field: str) -> None:
    parser = BulkParser()
    parser.spec(doc(**good))
    parse_job_document(doc(**good))
    for parse in (parser.spec, parse_job_spec):
        with pytest.raises(ValidationError) as info:
            parse(doc(**bad))
        assert info.value.field == field


def test_a_remembered_payload_keeps_its_number_types() -> None:
    one = parse_job_spec(doc(payload={"url": "https://example.org", "body": [1, 1.0, True]}))
    again = parse_job_spec(doc(payload={"url": "https://example.org", "body": [1.0, True, 1]}))
    assert [type(v) for v in one.payload["body"]] == [int, float, bool]
    assert [type(v) for v in again.payload["body"]] == [float, bool, int]


def test_a_bulk_parse_shares_equal_payloads_and_detaches_them_from_the_caller() -> None:
    parser = BulkParser()
    body = {"a": [1, 2]}
    first = parser.spec(doc(payload={"url": "https://example.org", "body": body}))
    second = parser.spec(doc(name="b", payload={"url": "https://example.org",
                                                "body": {"a": [1, 2]}}))
    other = parser.spec(doc(name="c", payload={"url": "https://example.org",
                                               "body": {"a": [1, 2.0]}}))
    assert first.payload is second.payload
    assert other.payload is not first.payload
    assert type(other.payload["body"]["a"][1]) is float
    body["a"].append(3)
    assert first.payload["body"] == {"a": [1, 2]}
    # outside a bulk parse, every spec has a payload of its own
    alone = [parse_job_spec(doc(payload={"url": "https://example.org"})) for _ in range(2)]
    assert alone[0].payload == alone[1].payload
    assert alone[0].payload is not alone[1].payload


def test_a_bulk_parse_gives_what_a_single_parse_gives() -> None:
    documents = [FULL, BASE, doc(schedule={"cron": "*/5 * * * * *"}, tags=["a", "b"]),
                 doc(schedule={"every": "10s", "offset": 3}, retry={"max_attempts": 1}),
                 doc(schedule={"at": "2030-01-01T00:00:00+01:00"}, kind="python",
                     payload={"callable": "a.b:c", "kwargs": {"x": [1, None, "é"]}})]
    parser = BulkParser()
    for document in documents * 2:
        assert parser.spec(document) == parse_job_document(document).spec


# --- what parses ----------------------------------------------------------------------------


def test_defaults_are_filled_in() -> None:
    parsed = parse_job_document(BASE)
    spec = parsed.spec
    assert spec == JobSpec(
        name="ping",
        schedule=ScheduleSpec(type="every", every_seconds=3600.0),
        kind="http",
        payload=spec.payload,
        queue="default",
        priority=0,
        retry=RetryPolicy(max_attempts=3, backoff_base_seconds=2.0, backoff_max_seconds=300.0,
                          jitter="full"),
        timeout_seconds=30.0,
        overlap=Overlap.SKIP,
        catchup_window_seconds=3600.0,
        paused=False,
        tags=(),
        delivery=Delivery.AT_LEAST_ONCE,
    )
    assert spec.payload["url"] == "https://example.org/hook"
    assert parsed.warnings == ()


def test_the_full_document_round_trips() -> None:
    first = parse_job_document(FULL)
    again = parse_job_document(job_document(first.spec))
    assert again.spec == first.spec
    assert job_document(again.spec) == job_document(first.spec)
    assert job_document(first.spec) == {**FULL, "payload": first.spec.payload}


@pytest.mark.parametrize("schedule", [
    {"at": "2030-06-01T12:30:00.250Z", "jitter_seconds": 1.5},
    {"cron": "*/15 9-17 * * 1-5", "timezone": "America/New_York",
     "start_at": "2030-01-01T00:00:00Z", "end_at": "2031-01-01T00:00:00Z"},
    {"cron": "30 0 3 * * *"},
    {"every": 90.5, "offset": "30s", "start_at": "2030-01-01T00:00:00+02:00"},
])
def test_every_schedule_shape_round_trips(schedule: dict[str, Any]) -> None:
    spec = parse_job_document(doc(schedule=schedule)).spec
    out = job_document(spec)
    assert parse_job_document(out).spec == spec


def test_the_three_schedule_types_parse() -> None:
    at = parse_job_document(doc(schedule={"at": "2030-01-01T10:00:00+01:00"})).spec.schedule
    assert at == ScheduleSpec(type="at", at=datetime(2030, 1, 1, 9, tzinfo=UTC))
    cron = parse_job_document(doc(schedule={"cron": "0 3 * * *"})).spec.schedule
    assert cron == ScheduleSpec(type="cron", cron="0 3 * * *", timezone="UTC")
    every = parse_job_document(doc(schedule={
        "every": "15m", "offset": "1m", "start_at": "2030-01-01T00:00:00Z",
        "end_at": "2030-02-01T00:00:00Z", "jitter_seconds": "30s",
    })).spec.schedule
    assert every == ScheduleSpec(
        type="every", every_seconds=900.0, offset_seconds=60.0,
        start_at=datetime(2030, 1, 1, tzinfo=UTC), end_at=datetime(2030, 2, 1, tzinfo=UTC),
        jitter_seconds=30.0,
    )


def test_an_at_schedule_takes_overlap_and_jitter() -> None:
    spec = parse_job_document(doc(schedule={"at": "2030-01-01T00:00:00Z", "jitter_seconds": 60},
                                  overlap="allow_all")).spec
    assert spec.overlap is Overlap.ALLOW_ALL
    assert spec.schedule.jitter_seconds == 60.0


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("timeout_seconds", "90s", 90.0),
    ("timeout_seconds", "1h", 3600.0),
    ("timeout_seconds", 86400, 86400.0),
    ("timeout_seconds", 0.5, 0.5),
    ("catchup_window_seconds", 0, 0.0),
    ("catchup_window_seconds", "1d", 86400.0),
    ("priority", -1000, -1000),
    ("priority", 1000, 1000),
    ("priority", 7.0, 7),  # JSON has one number type: 7.0 is the integer 7
    ("queue", "mail.v2_high-prio", "mail.v2_high-prio"),
    ("name", "x" * 200, "x" * 200),
    ("name", "Nightly report ✓", "Nightly report ✓"),
    ("tags", [f"t:{i}" for i in range(20)], tuple(f"t:{i}" for i in range(20))),
    ("paused", True, True),
    ("delivery", "at_most_once", Delivery.AT_MOST_ONCE),
    ("overlap", "buffer_all", Overlap.BUFFER_ALL),
])
def test_accepted_values(field: str, value: Any, expected: Any) -> None:
    assert getattr(parse_job_document(doc(**{field: value})).spec, field) == expected


def test_retry_fields_accept_durations_and_keep_defaults_for_the_rest() -> None:
    spec = parse_job_document(doc(retry={"backoff_base_seconds": "1s",
                                         "backoff_max_seconds": "1m"})).spec
    assert spec.retry == RetryPolicy(max_attempts=3, backoff_base_seconds=1.0,
                                     backoff_max_seconds=60.0, jitter="full")


def test_a_payload_of_exactly_the_limit_is_accepted() -> None:
    # {"url":"https://example.org","body":"..."} is 39 bytes plus the body's characters.
    payload = {"url": "https://example.org", "body": "x" * (65536 - 39)}
    assert parse_job_document(doc(payload=payload)).spec.payload["body"] == payload["body"]


def test_the_payload_is_normalised_by_its_executor_and_copied() -> None:
    body = {"a": [1, 2]}
    spec = parse_job_document(doc(payload={"url": "https://example.org", "body": body})).spec
    assert spec.payload["method"] == "POST"
    body["a"].append(3)
    assert spec.payload["body"] == {"a": [1, 2]}


@pytest.mark.parametrize(("kind", "payload"), [
    ("http", {"url": "https://example.org/ping"}),
    ("shell", {"command": ["/usr/bin/backup", "--full"]}),
    ("python", {"callable": "reports.jobs:nightly", "args": [1], "kwargs": {"full": True}}),
])
def test_each_available_kind_parses(kind: str, payload: dict[str, Any]) -> None:
    spec = parse_job_document(doc(kind=kind, payload=payload)).spec
    assert spec.kind == kind
    assert parse_job_document(job_document(spec)).spec == spec


# --- partial updates ------------------------------------------------------------------------


def test_a_partial_update_keeps_absent_fields() -> None:
    current = parse_job_document(FULL).spec
    updated = parse_job_document({"paused": True, "tags": []}, defaults=current).spec
    assert updated.paused is True
    assert updated.tags == ()
    assert job_document(updated) | {"paused": False, "tags": ["reports"]} == job_document(current)


def test_an_empty_update_changes_nothing() -> None:
    current = parse_job_document(FULL).spec
    assert parse_job_document({}, defaults=current).spec == current


def test_a_nested_object_in_an_update_replaces_the_old_one_whole() -> None:
    current = parse_job_document(doc(retry={"max_attempts": 9, "backoff_base_seconds": 5})).spec
    updated = parse_job_document({"retry": {"jitter": "none"}}, defaults=current).spec
    assert updated.retry == RetryPolicy(jitter="none")


def test_an_update_is_validated_like_a_document() -> None:
    current = parse_job_document(FULL).spec
    error = rejection({"priority": 5000}, defaults=current)
    assert error.field == "priority"
    # changing the kind alone re-checks the kept payload against the new kind
    assert rejection({"kind": "python"}, defaults=current).field.startswith("payload")
    changed = parse_job_document({"kind": "python", "payload": {"callable": "a.b:c"}},
                                 defaults=current).spec
    assert (changed.kind, changed.payload["callable"]) == ("python", "a.b:c")


def test_an_update_can_bring_a_warning() -> None:
    current = parse_job_document(FULL).spec
    parsed = parse_job_document({"schedule": {"every": "60s"}}, defaults=current)
    assert len(parsed.warnings) == 1


# --- the retry-span warning -----------------------------------------------------------------


def expected_warning(interval: float, overlap_effect: str, retry: RetryPolicy | None = None,
                     timeout: float = 30.0) -> str:
    retry = retry or RetryPolicy()
    span = worst_case_retry_span(retry, timeout)
    return (f"retries can take up to {fmt(span)}s ({retry.max_attempts} attempts of "
            f"{fmt(timeout)}s timeout with backoff up to {fmt(retry.backoff_max_seconds)}s), "
            f"longer than the {fmt(interval)}s between runs; {overlap_effect}")


def test_a_recurring_job_whose_retries_outlast_its_interval_gets_a_warning() -> None:
    parsed = parse_job_document(doc(schedule={"every": "60s"}))
    assert parsed.warnings == (
        expected_warning(60, "later runs may be skipped by overlap 'skip'"),
    )


def test_the_warning_estimates_a_cron_interval() -> None:
    parsed = parse_job_document(doc(schedule={"cron": "* * * * *", "timezone": "Europe/Berlin"}))
    assert parsed.warnings == (
        expected_warning(60, "later runs may be skipped by overlap 'skip'"),
    )


def test_the_warning_names_the_overlap_policy() -> None:
    parsed = parse_job_document(doc(schedule={"every": 60}, overlap="buffer_all"))
    assert parsed.warnings == (
        expected_warning(60, "later runs may pile up behind it with overlap 'buffer_all'"),
    )


@pytest.mark.parametrize("changes", [
    {"schedule": {"every": "1h"}},
    {"schedule": {"cron": "0 3 * * *"}},
    {"schedule": {"cron": "*/15 * * * *"}},
    {"schedule": {"at": "2030-01-01T00:00:00Z"}},
    {"schedule": {"every": 60}, "retry": {"max_attempts": 1}, "timeout_seconds": 30},
    {"schedule": {"every": 60}, "delivery": "at_most_once"},  # never retried
])
def test_no_warning_when_retries_fit(changes: dict[str, Any]) -> None:
    assert parse_job_document(doc(**changes)).warnings == ()


def test_a_single_attempt_longer_than_the_interval_is_worded_as_one() -> None:
    parsed = parse_job_document(doc(schedule={"every": 60}, retry={"max_attempts": 1},
                                    timeout_seconds=90))
    span = worst_case_retry_span(RetryPolicy(max_attempts=1), 90.0)
    assert parsed.warnings == (
        f"retries can take up to {fmt(span)}s (1 attempt of 90s timeout), longer than the 60s "
        "between runs; later runs may be skipped by overlap 'skip'",
    )


# --- instants -------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("2030-01-01T09:00:00Z", datetime(2030, 1, 1, 9, tzinfo=UTC)),
    ("2030-01-01t09:00:00z", datetime(2030, 1, 1, 9, tzinfo=UTC)),
    ("2030-01-01 09:00:00Z", datetime(2030, 1, 1, 9, tzinfo=UTC)),
    ("2030-01-01T09:00:00+02:00", datetime(2030, 1, 1, 7, tzinfo=UTC)),
    ("2030-01-01T00:30:00-01:00", datetime(2030, 1, 1, 1, 30, tzinfo=UTC)),
    ("2030-01-01T09:00:00.5Z", datetime(2030, 1, 1, 9, 0, 0, 500000, tzinfo=UTC)),
    ("2030-01-01T09:00:00.123456789Z", datetime(2030, 1, 1, 9, 0, 0, 123456, tzinfo=UTC)),
])
def test_parse_instant_reads_rfc3339(text: str, expected: datetime) -> None:
    parsed = parse_instant(text, "at")
    assert parsed == expected
    assert parsed.tzinfo is UTC


def test_parse_instant_takes_aware_datetimes_and_refuses_naive_ones() -> None:
    aware = datetime(2030, 1, 1, 10, tzinfo=timezone(timedelta(hours=1)))
    assert parse_instant(aware, "at") == datetime(2030, 1, 1, 9, tzinfo=UTC)
    with pytest.raises(ValidationError) as info:
        parse_instant(datetime(2030, 1, 1, 9), "start_at")
    assert str(info.value) == f"start_at: {OFFSET}"


def test_instants_are_written_in_utc_with_z() -> None:
    spec = parse_job_document(doc(schedule={"at": "2030-01-01T10:00:00.25+01:00"})).spec
    assert job_document(spec)["schedule"] == {"at": "2030-01-01T09:00:00.250000Z"}


# --- the docs' examples run (STYLE habit 13) ------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "job-document.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.parametrize("text", blocks("json"))
def test_the_documented_examples_are_valid(text: str) -> None:
    example = json.loads(text)
    if "name" in example:
        spec = parse_job_document(example).spec
        assert parse_job_document(job_document(spec)).spec == spec
    else:  # an update
        parse_job_document(example, defaults=parse_job_document(FULL).spec)


def test_the_documented_warning_is_the_real_one() -> None:
    documented = [" ".join(text.split()) for text in blocks("text") if "retries" in text]
    assert documented == list(parse_job_document(doc(schedule={"every": "60s"})).warnings)
