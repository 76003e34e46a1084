"""The job document: every rejection with its exact message, round trips, defaults, warnings."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tickwork.document import (
    DURATION_RULE,
    QUEUE_NAME_RULE,
    TAG_RULE,
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
}

TOO_DEEP: Any = "leaf"
for _ in range(70):
    TOO_DEEP = [TOO_DEEP]


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


# --- rejections: (document, field, reason) ---------------------------------------------------

ONE_OF_KINDS = "must be one of http, slack, email, shell, python"
ONE_OF_OVERLAPS = "must be one of skip, buffer_one, buffer_all, cancel_previous, allow_all"
RFC = "must be an RFC 3339 timestamp such as 2030-01-01T09:00:00Z"
OFFSET = "must include a UTC offset, e.g. 2030-01-01T09:00:00Z"

REJECTIONS = [
    # the document itself
    ([], "", "the job document must be a JSON object (got an array)"),
    ("{}", "", "the job document must be a JSON object (got '{}')"),
    (None, "", "the job document must be a JSON object (got null)"),
    (doc(colour="red"), "", "unknown field 'colour'"),
    (doc(queu="mail"), "", "unknown field 'queu' (did you mean 'queue'?)"),
    (doc(name=...), "name", "is required"),
    (doc(schedule=...), "schedule", "is required"),
    (doc(kind=..., payload=...), "kind", "is required"),
    (doc(payload=...), "payload", "is required"),
    # name
    (doc(name=5), "name", "must be a string (got 5)"),
    (doc(name=None), "name", "must be a string (got null)"),
    (doc(name=""), "name", "must not be empty"),
    (doc(name="x" * 201), "name", "must be at most 200 characters (got 201)"),
    (doc(name="a\nb"), "name", "must not contain control characters"),
    (doc(name="a\x7fb"), "name", "must not contain control characters"),
    (doc(name=" ping"), "name", "must not start or end with whitespace"),
    (doc(name="ping\u00a0"), "name", "must not start or end with whitespace"),
    (doc(name="a\x00b"), "name", "must not contain NUL characters"),
    (doc(name="<script>alert(1)</script>"), "name",
     "must not contain / < > (not allowed: \" & ' / < > \\ `)"),
    (doc(name="reports/daily"), "name",
     "must not contain / (not allowed: \" & ' / < > \\ `)"),
    # queue
    (doc(queue="bad queue"), "queue", f"{QUEUE_NAME_RULE} (got 'bad queue')"),
    (doc(queue=""), "queue", f"{QUEUE_NAME_RULE} (got '')"),
    (doc(queue="q" * 65), "queue", f"{QUEUE_NAME_RULE} (got '{'q' * 37}...')"),
    (doc(queue="mail\n"), "queue", f"{QUEUE_NAME_RULE} (got 'mail\\n')"),
    (doc(queue=1), "queue", "must be a string (got 1)"),
    # priority
    (doc(priority="3"), "priority", "must be an integer from -1000 to 1000 (got '3')"),
    (doc(priority=True), "priority", "must be an integer from -1000 to 1000 (got true)"),
    (doc(priority=1.5), "priority", "must be an integer from -1000 to 1000 (got 1.5)"),
    (doc(priority=1001), "priority", "must be an integer from -1000 to 1000 (got 1001)"),
    (doc(priority=-1001), "priority", "must be an integer from -1000 to 1000 (got -1001)"),
    (doc(priority=None), "priority", "must be an integer from -1000 to 1000 (got null)"),
    # kind
    (doc(kind="smtp"), "kind", f"{ONE_OF_KINDS} (got 'smtp')"),
    (doc(kind="htp"), "kind", f"{ONE_OF_KINDS} (got 'htp'; did you mean 'http'?)"),
    (doc(kind=1), "kind", f"{ONE_OF_KINDS} (got 1)"),
    (doc(kind=["http"]), "kind", f"{ONE_OF_KINDS} (got an array)"),
    # payload (the document's own rules; the kind's rules are the executors')
    (doc(payload=[]), "payload", "must be an object (got an array)"),
    (doc(payload="https://example.org"), "payload", "must be an object (got 'https://example.org')"),
    (doc(payload={"url": "https://example.org", "body": "x" * 70000}), "payload",
     "is 70039 bytes as JSON; the limit is 65536"),
    (doc(payload={"url": "https://example.org", "body": "é" * 33000}), "payload",
     "is 66039 bytes as JSON; the limit is 65536"),
    (doc(payload={"url": "https://example.org", "body": float("nan")}), "payload",
     "must contain only JSON values (Out of range float values are not JSON compliant)"),
    (doc(payload={"url": "https://example.org", "body": datetime(2030, 1, 1)}), "payload",
     "must contain only JSON values (Object of type datetime is not JSON serializable)"),
    (doc(payload={"url": "https://example.org", "body": {"text": "a\x00b"}}),
     "payload.body.text", "must not contain NUL characters"),
    (doc(payload={"url": "https://example.org", "body": ["ok", "a\x00"]}),
     "payload.body[1]", "must not contain NUL characters"),
    (doc(payload={"url": "https://example.org", "headers": {"X-A\x00": "1"}}),
     "payload.headers", "object keys must not contain NUL characters"),
    (doc(payload={"url": "https://example.org", "body": {1: "a"}}),
     "payload.body", "object keys must be strings (got 1)"),
    (doc(payload={"url": "https://example.org", "body": TOO_DEEP}),
     "payload.body" + "[0]" * 64, "is nested more than 64 levels deep"),
    # schedule
    (doc(schedule="0 3 * * *"), "schedule", "must be an object (got '0 3 * * *')"),
    (doc(schedule={}), "schedule", "must have one of 'at', 'cron' or 'every'"),
    (doc(schedule={"timezone": "UTC"}), "schedule", "must have one of 'at', 'cron' or 'every'"),
    (doc(schedule={"cron": "* * * * *", "every": 60}), "schedule",
     "has both 'cron' and 'every'; use exactly one"),
    (doc(schedule={"at": "2030-01-01T00:00:00Z", "every": 60}), "schedule",
     "has both 'at' and 'every'; use exactly one"),
    (doc(schedule={"evry": 60}), "schedule", "unknown field 'evry' (did you mean 'every'?)"),
    (doc(schedule={"every": 60, "colour": 1}), "schedule", "unknown field 'colour'"),
    (doc(schedule={"every": 60, "timezone": "UTC"}), "schedule.timezone",
     "only applies to 'cron' schedules"),
    (doc(schedule={"at": "2030-01-01T00:00:00Z", "timezone": "UTC"}), "schedule.timezone",
     "only applies to 'cron' schedules"),
    (doc(schedule={"cron": "* * * * *", "offset": 5}), "schedule.offset",
     "only applies to 'every' schedules"),
    (doc(schedule={"every": 0.5}), "schedule.every", "must be at least 1s"),
    (doc(schedule={"every": 0}), "schedule.every", "must be at least 1s"),
    (doc(schedule={"every": True}), "schedule.every", f"{DURATION_RULE} (got true)"),
    (doc(schedule={"every": None}), "schedule.every", f"{DURATION_RULE} (got null)"),
    (doc(schedule={"every": float("inf")}), "schedule.every",
     "must be a finite number (got Infinity)"),
    (doc(schedule={"every": 60, "offset": -1}), "schedule.offset", "must be at least 0 (got -1)"),
    (doc(schedule={"cron": ""}), "schedule.cron", "must not be empty"),
    (doc(schedule={"cron": 5}), "schedule.cron", "must be a string (got 5)"),
    (doc(schedule={"cron": "* * * * *\x00"}), "schedule.cron", "must not contain NUL characters"),
    (doc(schedule={"cron": "* * * * *", "timezone": "Mars/Olympus"}), "schedule.timezone",
     "unknown time zone 'Mars/Olympus'"),
    (doc(schedule={"cron": "* * * * *", "timezone": 1}), "schedule.timezone",
     "must be a string (got 1)"),
    (doc(schedule={"at": "2030-01-01T09:00:00"}), "schedule.at", OFFSET),
    (doc(schedule={"at": "2030-01-01 09:00:00"}), "schedule.at", OFFSET),
    (doc(schedule={"at": "tomorrow"}), "schedule.at", f"{RFC} (got 'tomorrow')"),
    (doc(schedule={"at": "2030-01-01"}), "schedule.at", f"{RFC} (got '2030-01-01')"),
    (doc(schedule={"at": "2030-01-01T09:00Z"}), "schedule.at", f"{RFC} (got '2030-01-01T09:00Z')"),
    (doc(schedule={"at": 1893488400}), "schedule.at", f"{RFC} (got 1893488400)"),
    (doc(schedule={"at": None}), "schedule.at", f"{RFC} (got null)"),
    (doc(schedule={"at": "2030-02-30T09:00:00Z"}), "schedule.at",
     "is not a valid date and time (got '2030-02-30T09:00:00Z')"),
    (doc(schedule={"at": "2030-01-01T09:00:00+25:00"}), "schedule.at",
     "is not a valid date and time (got '2030-01-01T09:00:00+25:00')"),
    (doc(schedule={"every": 60, "start_at": "2030-01-01T09:00:00"}), "schedule.start_at", OFFSET),
    (doc(schedule={"every": 60, "end_at": "soon"}), "schedule.end_at", f"{RFC} (got 'soon')"),
    (doc(schedule={"every": 60, "start_at": "2030-01-02T00:00:00Z",
                   "end_at": "2030-01-01T00:00:00Z"}),
     "schedule.end_at", "must be after start_at (2030-01-02T00:00:00Z)"),
    (doc(schedule={"every": 60, "start_at": "2030-01-02T00:00:00Z",
                   "end_at": "2030-01-02T01:00:00+01:00"}),
     "schedule.end_at", "must be after start_at (2030-01-02T00:00:00Z)"),
    (doc(schedule={"every": 60, "jitter_seconds": -1}), "schedule.jitter_seconds",
     "must be at least 0 (got -1)"),
    (doc(schedule={"every": 60, "jitter_seconds": 3601}), "schedule.jitter_seconds",
     "must be at most 3600 seconds (got 3601)"),
    (doc(schedule={"every": 60, "jitter_seconds": "2h"}), "schedule.jitter_seconds",
     "must be at most 3600 seconds (got 7200)"),
    (doc(schedule={"every": 60, "jitter_seconds": []}),
     "schedule.jitter_seconds", f"{DURATION_RULE} (got an array)"),
    # retry
    (doc(retry=3), "retry", "must be an object (got 3)"),
    (doc(retry={"max_attempt": 3}), "retry", "unknown field 'max_attempt' (did you mean "
                                             "'max_attempts'?)"),
    (doc(retry={"max_attempts": 0}), "retry.max_attempts",
     "must be an integer from 1 to 100 (got 0)"),
    (doc(retry={"max_attempts": 101}), "retry.max_attempts",
     "must be an integer from 1 to 100 (got 101)"),
    (doc(retry={"max_attempts": "3"}), "retry.max_attempts",
     "must be an integer from 1 to 100 (got '3')"),
    (doc(retry={"max_attempts": True}), "retry.max_attempts",
     "must be an integer from 1 to 100 (got true)"),
    (doc(retry={"backoff_base_seconds": 0}), "retry.backoff_base_seconds",
     "must be greater than 0 (got 0)"),
    (doc(retry={"backoff_base_seconds": -2}), "retry.backoff_base_seconds",
     "must be greater than 0 (got -2)"),
    (doc(retry={"backoff_base_seconds": False}), "retry.backoff_base_seconds",
     f"{DURATION_RULE} (got false)"),
    (doc(retry={"backoff_max_seconds": 0}), "retry.backoff_max_seconds",
     "must be greater than 0 (got 0)"),
    (doc(retry={"backoff_base_seconds": 10, "backoff_max_seconds": 5}),
     "retry.backoff_max_seconds", "must be at least backoff_base_seconds (10) (got 5)"),
    (doc(retry={"backoff_base_seconds": 500}), "retry.backoff_base_seconds",
     "must be at most backoff_max_seconds (300) (got 500)"),
    (doc(retry={"jitter": "fulll"}), "retry.jitter",
     "must be one of full, equal, none (got 'fulll'; did you mean 'full'?)"),
    (doc(retry={"jitter": None}), "retry.jitter", "must be one of full, equal, none (got null)"),
    # timeout_seconds
    (doc(timeout_seconds=0), "timeout_seconds", "must be greater than 0 (got 0)"),
    (doc(timeout_seconds=-5), "timeout_seconds", "must be greater than 0 (got -5)"),
    (doc(timeout_seconds=86401), "timeout_seconds", "must be at most 86400 seconds (got 86401)"),
    (doc(timeout_seconds="25h"), "timeout_seconds", "must be at most 86400 seconds (got 90000)"),
    (doc(timeout_seconds=True), "timeout_seconds", f"{DURATION_RULE} (got true)"),
    (doc(timeout_seconds=[30]), "timeout_seconds", f"{DURATION_RULE} (got an array)"),
    (doc(timeout_seconds=float("nan")), "timeout_seconds", "must be a finite number (got NaN)"),
    (doc(timeout_seconds=10**400), "timeout_seconds",
     f"must be a finite number (got 1{'0' * 36}...)"),
    (doc(priority=10**400), "priority",
     f"must be an integer from -1000 to 1000 (got 1{'0' * 36}...)"),
    # overlap
    (doc(overlap="skipp"), "overlap", f"{ONE_OF_OVERLAPS} (got 'skipp'; did you mean 'skip'?)"),
    (doc(overlap="never"), "overlap", f"{ONE_OF_OVERLAPS} (got 'never')"),
    (doc(overlap=0), "overlap", f"{ONE_OF_OVERLAPS} (got 0)"),
    # catchup_window_seconds
    (doc(catchup_window_seconds=-1), "catchup_window_seconds", "must be at least 0 (got -1)"),
    (doc(catchup_window_seconds=None), "catchup_window_seconds",
     f"{DURATION_RULE} (got null)"),
    # paused
    (doc(paused="false"), "paused", "must be true or false (got 'false')"),
    (doc(paused=0), "paused", "must be true or false (got 0)"),
    (doc(paused=None), "paused", "must be true or false (got null)"),
    # tags
    (doc(tags="reports"), "tags", "must be an array of strings (got 'reports')"),
    (doc(tags={"a": 1}), "tags", "must be an array of strings (got an object)"),
    (doc(tags=[f"t{i}" for i in range(21)]), "tags", "must have at most 20 tags (got 21)"),
    (doc(tags=["ok", 3]), "tags[1]", "must be a string (got 3)"),
    (doc(tags=["ok", "bad tag"]), "tags[1]", f"{TAG_RULE} (got 'bad tag')"),
    (doc(tags=["ok", ""]), "tags[1]", f"{TAG_RULE} (got '')"),
    (doc(tags=["t" * 65]), "tags[0]", f"{TAG_RULE} (got '{'t' * 37}...')"),
    (doc(tags=["a", "b", "a"]), "tags[2]", "duplicate tag 'a'"),
    (doc(tags=["a", "b\x00"]), "tags[1]", "must not contain NUL characters"),
    # delivery
    (doc(delivery="exactly_once"), "delivery",
     "must be one of at_least_once, at_most_once (got 'exactly_once'; did you mean "
     "'at_least_once'?)"),
    (doc(delivery="never"), "delivery", "must be one of at_least_once, at_most_once (got 'never')"),
    (doc(delivery="at_most_one"), "delivery",
     "must be one of at_least_once, at_most_once (got 'at_most_one'; did you mean "
     "'at_most_once'?)"),
    (doc(delivery=False), "delivery", "must be one of at_least_once, at_most_once (got false)"),
]


@pytest.mark.parametrize(("document", "field", "reason"), REJECTIONS)
def test_rejections_name_the_field_and_the_reason(document: object, field: str,
                                                  reason: str) -> None:
    error = rejection(document)
    assert (error.field, error.reason) == (field, reason)
    assert str(error) == (f"{field}: {reason}" if field else reason)


@pytest.mark.parametrize(("document", "field"), [
    (doc(kind="slack"), "payload.url"),  # the http payload does not fit a slack job
    (doc(payload={}), "payload.url"),
    (doc(payload={"url": "ftp://example.org"}), "payload.url"),
    (doc(kind="python"), "payload.url"),  # the http payload does not fit a python job
    (doc(kind="python", payload={"callable": "no colon"}), "payload.callable"),
    (doc(kind="shell", payload={"command": "echo hi"}), "payload.command"),
    (doc(schedule={"cron": "61 * * * *"}), "schedule.cron"),
    (doc(schedule={"cron": "* * *"}), "schedule.cron"),
    (doc(schedule={"every": "soon"}), "schedule.every"),
    (doc(schedule={"every": 60, "offset": 60}), "schedule.offset"),
    (doc(timeout_seconds="soon"), "timeout_seconds"),
])
def test_rejections_delegated_to_the_schedules_and_executors(document: object,
                                                             field: str) -> None:
    assert rejection(document).field == field


@pytest.mark.parametrize(("document", "field"), [
    ({"queue": "bad queue", "name": "", **{k: v for k, v in BASE.items() if k != "name"}},
     "queue"),
    ({"name": "", "queue": "bad queue", **{k: v for k, v in BASE.items() if k != "name"}},
     "name"),
    ({"tags": [1], "colour": "red", **BASE}, "tags[0]"),
    ({"colour": "red", "tags": [1], **BASE}, ""),
    # the payload is checked against its kind at the later of the two
    ({"payload": BASE["payload"], "kind": "python", "priority": "high", "name": "n",
      "schedule": {"every": 60}}, "payload.url"),
    ({"payload": BASE["payload"], "priority": "high", "kind": "python", "name": "n",
      "schedule": {"every": 60}}, "priority"),
    ({"kind": "python", "priority": "high", "payload": BASE["payload"], "name": "n",
      "schedule": {"every": 60}}, "priority"),
])
def test_the_first_problem_in_document_order_is_raised(document: dict[str, Any],
                                                       field: str) -> None:
    assert rejection(document).field == field


@pytest.mark.parametrize(("document", "field", "reason"),
                         [r for r in REJECTIONS if isinstance(r[0], dict)])
def test_rejections_are_the_same_after_valid_documents_were_remembered(
        document: dict[str, Any], field: str, reason: str) -> None:
    # The valid documents parsed first, so the fields a rejected one shares with them are
    # remembered; a bulk parse then words the error exactly as a first parse does.
    parser = BulkParser()
    parser.spec(FULL)
    parser.spec(BASE)
    with pytest.raises(ValidationError) as info:
        parser.spec(document)
    assert (info.value.field, info.value.reason) == (field, reason)


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

DOCS = Path(__file__).resolve().parent.parent / "docs" / "job-document.md"


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
