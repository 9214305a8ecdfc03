"""Prometheus metrics: scraped from Ray's endpoint after real requests; the Grafana dashboard
asks only for series raymem exports."""

import asyncio
import json
import re
from collections import defaultdict
from pathlib import Path

import httpx
import pytest
from conftest import wait_until
from prometheus_client.parser import text_string_to_metric_families

from raymem import metrics

DASHBOARD = Path(__file__).parent.parent / "cluster" / "grafana-dashboard.json"
EXPORTED = {metrics.RAY_PREFIX + metric.name for metric in metrics.ALL}
SERIES = re.compile(r"\bray_raymem_[a-z_]+")
HISTOGRAM_PARTS = ("_bucket", "_count", "_sum")
SCRAPE_TIMEOUT_S = 120  # Ray's agent exports every few seconds; a loaded machine is slower


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every ``ray_raymem_*`` sample on the endpoint: name -> [(labels, value)]."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("ray_raymem_"):
                samples[sample.name].append((sample.labels, sample.value))
    return samples


def total(samples, name: str, **labels: str) -> float:
    return sum(
        value
        for found, value in samples.get(name, [])
        if all(found.get(key) == want for key, want in labels.items())
    )


def test_requests_stages_profiles_and_the_embedder_are_exported(
    http, server_settings, profile_name
):
    base = f"/v1/profiles/{profile_name}"
    sent = 3
    for index in range(sent):
        response = http.post(
            f"{base}/memories", json={"content": f"Fact number {index}: the sky is blue."}
        )
        assert response.status_code == 201
    turns = [{"role": "user", "content": "My bike is a green Brompton."}]
    http.post(f"{base}/ingest", json={"session_id": "s1", "messages": turns}).raise_for_status()
    http.post(f"{base}/recall", json={"query": "What colour is my bike?"}).raise_for_status()
    assert http.post(f"{base}/recall", json={}).status_code == 400
    port = server_settings.server.metrics_port
    remember = {"route": "/v1/profiles/{profile}/memories", "method": "POST", "status": "201"}
    refused = {"route": "/v1/profiles/{profile}/recall", "method": "POST", "status": "400"}

    def everything_arrived():
        samples = scrape(port)
        arrived = (
            total(samples, "ray_raymem_requests_total", **remember) >= sent
            and total(samples, "ray_raymem_requests_total", **refused) >= 1
            and total(samples, "ray_raymem_stage_latency_ms_count", pipeline="recall") > 0
            and total(samples, "ray_raymem_memories_added_total", source="ingest") >= 1
            and total(samples, "ray_raymem_activations_total") >= 1
            and total(samples, "ray_raymem_embedder_batch_size_count") > 0
            and total(samples, "ray_raymem_profiles", state="live") >= 1
        )
        return samples if arrived else None

    samples = wait_until(everything_arrived, timeout=SCRAPE_TIMEOUT_S, interval=1.0)
    assert total(samples, "ray_raymem_request_latency_ms_count", **remember) >= sent
    latency_buckets = [
        value
        for labels, value in samples["ray_raymem_request_latency_ms_bucket"]
        if labels["route"] == remember["route"] and labels["le"] == "+Inf"
    ]
    assert sum(latency_buckets) >= sent
    assert total(samples, "ray_raymem_stage_latency_ms_sum", pipeline="recall", stage="total") > 0
    assert total(samples, "ray_raymem_stage_latency_ms_count", pipeline="ingest") > 0
    assert total(samples, "ray_raymem_memories_added_total", source="remember") >= sent
    assert total(samples, "ray_raymem_activation_latency_ms_sum") > 0
    # Labels stay few: templates, never a profile's name.
    for name, found in samples.items():
        for labels, _ in found:
            assert profile_name not in " ".join(labels.values()), name


def test_object_store_retries_are_counted(
    serve_app, server_settings, throttling_proxy, store_via_proxy
):
    # This process drives the test cluster's Ray, so what it records is exported too.
    def retries() -> float:
        return total(
            scrape(server_settings.server.metrics_port), "ray_raymem_object_store_retries_total"
        )

    before = retries()
    throttling_proxy.fail_next(2, status=503, code="SlowDown")
    asyncio.run(store_via_proxy().put("metrics/a", b"payload"))
    assert throttling_proxy.statuses()[-3:] == [503, 503, 200]
    wait_until(lambda: retries() >= before + 2, timeout=SCRAPE_TIMEOUT_S, interval=1.0)


def test_metrics_outside_ray_record_nothing_and_check_their_labels():
    metrics.OBJECT_STORE_RETRIES.inc()  # a process without Ray: a no-op
    metrics.STAGE_LATENCY.observe(1.0, pipeline="recall", stage="total")
    with pytest.raises(ValueError, match="labels"):
        metrics.REQUESTS.inc(route="/x")


def test_every_dashboard_panel_asks_for_exported_series():
    dashboard = json.loads(DASHBOARD.read_text())
    asked = set()
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            names = set(SERIES.findall(target["expr"]))
            assert names, (panel["title"], target["expr"])
            for name in names:
                for part in HISTOGRAM_PARTS:
                    name = name.removesuffix(part)
                assert name in EXPORTED, (panel["title"], name)
                asked.add(name)
    assert asked == EXPORTED  # and every exported series has a panel
