"""The job document's rejections: each with the field it names and its exact message."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from test_document import BASE, FULL, OFFSET, doc, rejection

from tickwork.document import DURATION_RULE, QUEUE_NAME_RULE, TAG_RULE, BulkParser
from tickwork.errors import ValidationError

ONE_OF_KINDS = "must be one of http, slack, email, shell, python, publish"
ONE_OF_OVERLAPS = "must be one of skip, buffer_one, buffer_all, cancel_previous, allow_all"
RFC = "must be an RFC 3339 timestamp such as 2030-01-01T09:00:00Z"

TOO_DEEP: Any = "leaf"
for _ in range(70):
    TOO_DEEP = [TOO_DEEP]

# (document, field, reason)
ONE_OF_TYPES = "must have one of 'at', 'cron', 'every', 'weekly' or 'monthly'"
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
    (doc(schedule={}), "schedule", ONE_OF_TYPES),
    (doc(schedule={"timezone": "UTC"}), "schedule", ONE_OF_TYPES),
    (doc(schedule={"cron": "* * * * *", "every": 60}), "schedule",
     "has both 'cron' and 'every'; use exactly one"),
    (doc(schedule={"at": "2030-01-01T00:00:00Z", "every": 60}), "schedule",
     "has both 'at' and 'every'; use exactly one"),
    (doc(schedule={"evry": 60}), "schedule", "unknown field 'evry' (did you mean 'every'?)"),
    (doc(schedule={"every": 60, "colour": 1}), "schedule", "unknown field 'colour'"),
    (doc(schedule={"every": 60, "timezone": "UTC"}), "schedule.timezone",
     "only applies to 'cron', 'weekly' or 'monthly' schedules"),
    (doc(schedule={"at": "2030-01-01T00:00:00Z", "timezone": "UTC"}), "schedule.timezone",
     "only applies to 'cron', 'weekly' or 'monthly' schedules"),
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
