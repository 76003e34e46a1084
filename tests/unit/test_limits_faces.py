"""Limits as users set and see them: the job document's limit_key and max_concurrency, the
REST API's queue limits and named limits (with their scopes and errors), /metrics, and the
held-by-limit lateness a worker reports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_api import Api, assert_problem, open_api

from tickwork.document import job_document, parse_job_document
from tickwork.drivers.codec import spec_from_json, spec_to_json
from tickwork.drivers.limits import Bucket, Rate, RateLimit, parse_rate
from tickwork.errors import ValidationError
from tickwork.metrics import Metrics
from tickwork.models import Claim
from tickwork.testing.factories import NOW, completion, job_spec, seconds

DOC: dict[str, Any] = {"name": "call-api", "schedule": {"every": "1m"}, "kind": "http",
                       "payload": {"url": "https://example.org/hook"}}


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    a, store = await open_api(tmp_path)
    yield a
    await a.http.aclose()
    await store.close()


# --- the job document -------------------------------------------------------------------


def test_limit_key_and_max_concurrency_round_trip() -> None:
    doc = {**DOC, "limit_key": "github-api", "overlap": "allow_all", "max_concurrency": 3}
    spec = parse_job_document(doc).spec
    assert (spec.limit_key, spec.max_concurrency) == ("github-api", 3)
    assert job_document(spec)["limit_key"] == "github-api"
    assert job_document(spec)["max_concurrency"] == 3
    assert spec_from_json(spec_to_json(spec)) == spec
    plain = parse_job_document(DOC).spec
    assert "limit_key" not in job_document(plain)
    assert "limit_key" not in spec_to_json(plain)  # older rows read as before


@pytest.mark.parametrize(("change", "field", "says"), [
    ({"limit_key": "a b"}, "limit_key", "letters, digits"),
    ({"limit_key": 5}, "limit_key", ""),
    ({"max_concurrency": 2}, "max_concurrency", "allow_all"),
    ({"overlap": "allow_all", "max_concurrency": 0}, "max_concurrency", ""),
    ({"overlap": "allow_all", "max_concurrency": "2"}, "max_concurrency", ""),
])
def test_bad_limit_fields_name_the_field(change: dict[str, Any], field: str,
                                         says: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_job_document({**DOC, **change})
    assert info.value.field == field
    assert says in str(info.value)


# --- rates and buckets ------------------------------------------------------------------


@pytest.mark.parametrize(("text", "rate"), [
    ("50/s", Rate(50, 1.0)), ("100/min", Rate(100, 60.0)), ("10 / h", Rate(10, 3600.0)),
    ("7/second", Rate(7, 1.0))])
def test_rates_parse(text: str, rate: Rate) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["", "50", "50/d", "0/s", "-1/s", "1.5/s", "s/50"])
def test_bad_rates_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"rate|count"):
        parse_rate(text)


def test_a_bucket_never_refills_past_its_burst_nor_backwards() -> None:
    limit = RateLimit(Rate(10, 1.0), burst=5)
    full = Bucket(0.0, None)
    assert limit.tokens(full, NOW) == 5
    spent = limit.take(full, NOW, 5)
    assert limit.tokens(spent, NOW + seconds(0.25)) == pytest.approx(2.5)
    assert limit.tokens(spent, NOW - seconds(10)) == 0  # a clock behind refills nothing
    assert limit.tokens(spent, NOW + seconds(60)) == 5
    assert limit.wait_seconds(spent, NOW) == pytest.approx(0.1)


# --- the REST API -----------------------------------------------------------------------


async def test_queue_limits_through_the_api(api: Api) -> None:
    body = {"max_running": 5, "rate": "50/s", "burst": 10}
    assert_problem(await api.http.put("/api/v1/queues/payments/limits", json=body,
                                      headers=api.auth("write")), 403)
    r = await api.http.put("/api/v1/queues/payments/limits", json=body, headers=api.auth())
    assert r.status_code == 200, r.text
    assert r.json() | {"tokens": None} == {
        "name": "payments", "paused": False, "waiting": 0, "due": 0, "running": 0,
        "max_running": 5, "rate": "50/s", "burst": 10, "tokens": None, "namespace": None}
    listed = (await api.get("/api/v1/queues")).json()["items"]
    assert [(q["name"], q["max_running"], q["rate"]) for q in listed] == [
        ("payments", 5, "50/s")]
    for bad in ({"rate": "fast"}, {"max_running": 0}, {"burst": 3}, {"max_runing": 1}):
        problem = assert_problem(await api.http.put(
            "/api/v1/queues/payments/limits", json=bad, headers=api.auth()), 422)
        assert problem["detail"]
    cleared = await api.http.put("/api/v1/queues/payments/limits", json={},
                                 headers=api.auth())
    assert cleared.json()["max_running"] is None


async def test_named_limits_through_the_api(api: Api) -> None:
    put = await api.http.put("/api/v1/limits/github-api", json={"rate": "100/min"},
                             headers=api.auth())
    assert put.json() == {"key": "github-api", "rate": "100/min", "burst": 100,
                          "tokens": 100.0, "namespace": None}
    items = (await api.get("/api/v1/limits")).json()["items"]
    assert [i["key"] for i in items] == ["github-api"]
    assert_problem(await api.http.put("/api/v1/limits/github-api", json={"burst": 2},
                                      headers=api.auth()), 422)
    assert_problem(await api.http.put("/api/v1/limits/bad%20key", json={"rate": "1/s"},
                                      headers=api.auth()), 422)
    assert (await api.delete("/api/v1/limits/github-api", scope="admin")).status_code == 204
    assert_problem(await api.delete("/api/v1/limits/github-api", scope="admin"), 404)


async def test_metrics_show_limits_and_usage(api: Api) -> None:
    await api.http.put("/api/v1/queues/payments/limits",
                       json={"max_running": 5, "rate": "50/s", "burst": 10},
                       headers=api.auth())
    await api.http.put("/api/v1/limits/github-api", json={"rate": "120/min"},
                       headers=api.auth())
    text = (await api.get("/metrics")).text
    assert 'tickwork_queue_max_running{queue="payments"} 5.0' in text
    assert 'tickwork_queue_rate_per_second{queue="payments"} 50.0' in text
    assert 'tickwork_queue_rate_tokens{queue="payments"} 10.0' in text
    assert 'tickwork_queue_running{queue="payments"} 0.0' in text
    assert 'tickwork_limit_rate_per_second{key="github-api"} 2.0' in text
    assert 'tickwork_limit_tokens{key="github-api"} 120.0' in text


# --- lateness held by a limit -----------------------------------------------------------


def test_lateness_held_by_a_limit_is_reported_apart() -> None:
    from tickwork.models import Job, Occurrence, OccurrenceState, Trigger

    spec = job_spec("late")
    job = Job(id="j", spec=spec, next_run_at=None, created_at=NOW, updated_at=NOW, shard=0)
    occ = Occurrence(job_id="j", scheduled_at=NOW, due_at=NOW, queue="default", priority=0,
                     state=OccurrenceState.RUNNING, attempt=1, max_attempts=3,
                     trigger=Trigger.SCHEDULE, idempotency_key="k", created_at=NOW,
                     updated_at=NOW)
    metrics = Metrics()
    held = Claim(occurrence=occ, job=job, limited_at=NOW + timedelta(seconds=0.2))
    metrics.attempt_finished(held, object(), completion(
        held, started_at=NOW + timedelta(seconds=30)))
    assert metrics.lateness["default"].sum == pytest.approx(0.2)
    assert metrics.held["default"].sum == pytest.approx(29.8)
