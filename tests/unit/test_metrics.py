"""/metrics: the worker's on_finished feeds the histograms; the store feeds the gauges."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from test_api import open_api

from tickwork.metrics import Histogram, Metrics, histogram_family
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
    assert 'tickwork_attempt_duration_seconds_bucket{kind="python",le="+Inf",result="success"} 1' \
        in text  # prometheus_client writes labels in name order
    assert "tickwork_lease_expiries_total 2" in text
    assert 'tickwork_queue_depth{queue="default"}' in text
    for line in text.splitlines():  # the exposition format: comments or "name{labels} value"
        assert line.startswith("# ") or float(line.rsplit(" ", 1)[1]) >= 0


def test_histogram_buckets_are_cumulative() -> None:
    m = Metrics()
    hist = Histogram((1.0, 2.0))
    for v in (0.5, 1.5, 3.0, 3.0):
        hist.observe(v)
    assert hist.cumulative() == [("1.0", 1), ("2.0", 2), ("+Inf", 4)]
    family = histogram_family("x", "x", [], [((), hist)])
    lines = generate_latest(SimpleNamespace(collect=lambda: [family])).decode().splitlines()
    assert lines[2:5] == ['x_bucket{le="1.0"} 1.0', 'x_bucket{le="2.0"} 2.0',
                          'x_bucket{le="+Inf"} 4.0']
    assert "x_count 4.0" in lines
    assert "tickwork_repairs_total 0.0" in m.render(states={}, queues=[]).splitlines()


def test_the_exposition_parses_and_has_process_metrics() -> None:
    m = Metrics()
    m.claimed("default", 3)
    m.promoter_backlog("default", 500)
    m.promoter_backlog("default", 240)  # a gauge: the bound now, not a sum
    text = m.render(states={"dead": 2}, queues=[])
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["tickwork_claims"].type == "counter"  # the parser drops "_total"
    assert [s.value for s in families["tickwork_claims"].samples] == [3]
    assert [s.labels for s in families["tickwork_occurrences"].samples] == [{"state": "dead"}]
    assert families["tickwork_promoter_backlog"].type == "gauge"
    assert [(s.labels, s.value) for s in families["tickwork_promoter_backlog"].samples] == [
        ({"queue": "default"}, 240)]
    for name in ("process_cpu_seconds", "process_resident_memory_bytes", "process_open_fds"):
        assert name in families, sorted(families)
    assert not [s for f in families.values() for s in f.samples
                if s.name.endswith("_created")]  # counts are the process's, from its start


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
