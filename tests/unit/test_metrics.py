"""/metrics: the worker's on_finished feeds the histograms; the store feeds the gauges."""

from __future__ import annotations

from pathlib import Path

from test_api import open_api

from tickwork.metrics import Histogram, Metrics
from tickwork.testing.harness import Harness


async def test_attempts_feed_histograms_and_the_store_feeds_gauges(harness: Harness) -> None:
    h = harness
    metrics = Metrics()
    h.pool.on_finished = metrics.attempt_finished
    await h.client.create_job({"name": "m", "schedule": {"every": "1s"}, "kind": "python",
                               "payload": {"callable": "tickwork.testing.jobs:nothing"}})
    await h.tick()
    await h.completed()
    metrics.rescued(2)
    text = metrics.render(states=(await h.client.stats(60)).occurrences_by_state,
                          queues=await h.client.list_queues(), all_states=["dead"])
    assert 'tickwork_occurrences{state="succeeded"} 1' in text
    assert 'tickwork_occurrences{state="dead"} 0' in text
    assert 'tickwork_start_lateness_seconds_count{queue="default"} 1' in text
    assert 'tickwork_attempt_duration_seconds_bucket{kind="python",result="success",le="+Inf"} 1' \
        in text
    assert "tickwork_lease_expiries_total 2" in text
    assert 'tickwork_queue_depth{queue="default"}' in text
    for line in text.splitlines():  # the exposition format: comments or "name{labels} value"
        assert line.startswith("# ") or float(line.rsplit(" ", 1)[1]) >= 0


def test_histogram_buckets_are_cumulative() -> None:
    m = Metrics()
    hist = Histogram((1.0, 2.0))
    for v in (0.5, 1.5, 3.0, 3.0):
        hist.observe(v)
    lines = hist.lines("x")
    assert lines[:3] == ['x_bucket{le="1"} 1', 'x_bucket{le="2"} 2', 'x_bucket{le="+Inf"} 4']
    assert lines[-1] == "x_count 4"
    assert m.render(states={}, queues=[]).endswith("tickwork_repairs_total 0\n")


async def test_metrics_endpoint_needs_a_token(tmp_path: Path) -> None:
    api, store = await open_api(tmp_path)
    try:
        r = await api.get("/metrics")
        assert r.status_code == 200
        assert "# TYPE tickwork_start_lateness_seconds histogram" in r.text
        assert (await api.http.get("/metrics")).status_code == 401
    finally:
        await api.http.aclose()
        await store.close()
