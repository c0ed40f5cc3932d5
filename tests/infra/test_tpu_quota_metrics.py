"""Which Cloud TPU quota a slice draws on, and how much of it, read from Service Usage's
ConsumerQuotaMetric shapes (serviceusage.v1beta1.json)."""

from __future__ import annotations

import pytest

from infra.workers.tpu_quota import TpuQuotaKey, find_metric, location_limit, slice_need

ZONE = "us-east1-d"


def metric(name: str, *limits: dict) -> dict:
    return {"metric": f"tpu.googleapis.com/{name}", "consumerQuotaLimits": list(limits)}


@pytest.mark.parametrize(("accelerator", "config", "expected"), [
    ("v2-8", None, (TpuQuotaKey("v2", "on-demand", False), 8)),
    ("v3-32", None, (TpuQuotaKey("v3", "on-demand", True), 32)),  # a pod slice
    ("v4-16", None, (TpuQuotaKey("v4", "on-demand", False), 16)),  # TensorCores
    ("v5litepod-4", None, (TpuQuotaKey("v5e", "on-demand", False), 4)),  # chips
    ("v6e-8", None, (TpuQuotaKey("v6e", "on-demand", False), 8)),
    (None, ("V5P", "2x2x1"), (TpuQuotaKey("v5p", "on-demand", False), 8)),  # 4 chips
    (None, ("V5LITE_POD", "2x4"), (TpuQuotaKey("v5e", "on-demand", False), 8)),
    ("v9z-8", None, None),
])
def test_a_slice_takes_the_units_its_generation_counts(accelerator, config, expected):
    config_type, topology = config or (None, None)
    assert slice_need(accelerator, "on-demand", config_type, topology) == expected


def test_the_training_metric_is_told_apart_from_serving_and_on_demand():
    listed = [metric("tpu-v5s-litepod"), metric("tpu-v5s-litepod-serving-preemptible"),
              metric("tpu-v5s-litepod-preemptible")]
    found = find_metric(listed, TpuQuotaKey("v5e", "preemptible", False))
    assert found["metric"] == "tpu.googleapis.com/tpu-v5s-litepod-preemptible"


def test_v2_single_devices_and_pods_have_separate_quotas():
    listed = [metric("tpu-v2"), metric("tpu-v2-pod")]
    assert find_metric(listed, TpuQuotaKey("v2", "on-demand", True))["metric"].endswith("v2-pod")
    assert find_metric(listed, TpuQuotaKey("v2", "on-demand", False))["metric"].endswith("/tpu-v2")


def test_a_missing_or_ambiguous_metric_is_said_not_guessed():
    key = TpuQuotaKey("v4", "preemptible", False)
    assert find_metric([metric("tpu-v4s-preemptible")], key)["metric"].endswith("v4s-preemptible")
    assert find_metric([metric("tpu-v6e-preemptible")], key) == \
        "the project lists no such TPU quota"
    both = find_metric([metric("tpu-v4-preemptible"), metric("tpu-v4s-preemptible")], key)
    assert both.startswith("several quotas fit: tpu.googleapis.com/tpu-v4-preemptible")


def test_the_zone_bucket_wins_and_an_omitted_limit_is_zero():
    zone_limit = {"unit": "1/{project}/{zone}", "quotaBuckets": [
        {"effectiveLimit": "1536"}, {"dimensions": {"zone": ZONE}}]}
    assert location_limit(metric("tpu-v6e", zone_limit), ZONE) == (0, f"zone {ZONE}")
    assert location_limit(metric("tpu-v6e", zone_limit), "us-east1-b") == (1536, "zone us-east1-b")


def test_the_tighter_of_zone_and_region_limits_counts_and_minus_one_is_unlimited():
    zone_limit = {"unit": "1/{project}/{zone}", "quotaBuckets": [{"effectiveLimit": "64"}]}
    region_limit = {"unit": "1/{project}/{region}", "quotaBuckets": [
        {"effectiveLimit": "-1"}, {"dimensions": {"region": "us-east1"}, "effectiveLimit": "32"}]}
    assert location_limit(metric("tpu-v6e", zone_limit, region_limit), ZONE) == (
        32, "region us-east1")
    unlimited = {"unit": "1/{project}/{zone}", "quotaBuckets": [{"effectiveLimit": "-1"}]}
    assert location_limit(metric("tpu-v6e", unlimited), ZONE) is None
