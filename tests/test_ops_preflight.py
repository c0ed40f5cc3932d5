"""`invoke preflight`: the largest cluster against the region's quotas, read-only, as a table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.config import load_cluster_config
from ops.preflight import preflight, render
from tests.fake_compute import FakeComputeServer
from tests.fake_compute.helpers import fast_retry

CLUSTERS = Path(__file__).resolve().parents[1] / "stacks" / "clusters"


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        server.cloud.catalogue.zones["us-west1"] = ["us-west1-a", "us-west1-b"]
        yield server


def check(fake: FakeComputeServer, cluster: str):
    config = load_cluster_config(CLUSTERS / f"{cluster}.yaml")
    return preflight(config, api_endpoint=fake.endpoint, retry=fast_retry())


def test_gpu_cluster_at_max_size_is_counted_per_quota_and_nothing_is_created(fake):
    report = check(fake, "gpu-docker")

    needed = {row.metric: row.needed for row in report.rows}
    assert needed == {
        "CPUS": 8, "NVIDIA_T4_GPUS": 1,  # the on-demand head
        "PREEMPTIBLE_CPUS": 4, "PREEMPTIBLE_NVIDIA_T4_GPUS": 2,  # 2 x preemptible n1-standard-2
        "INSTANCES": 3, "DISKS_TOTAL_GB": 300}
    assert report.users["PREEMPTIBLE_CPUS"] == ["2 x ray_worker_gpu"]
    assert report.short == []
    assert sum(fake.cloud.calls[m] for m in ("bulkInsert", "insert", "tpu.create")) == 0


def test_short_quota_is_marked_in_the_table_with_where_to_ask(fake):
    fake.cloud.catalogue.quota_limits["PREEMPTIBLE_NVIDIA_T4_GPUS"] = 1
    fake.cloud.catalogue.quota_limits.pop("NVIDIA_T4_GPUS")

    report = check(fake, "gpu-docker")
    table = render(report)

    assert [row.metric for row in report.short] == ["PREEMPTIBLE_NVIDIA_T4_GPUS"]
    line = next(x for x in table.splitlines() if x.startswith("PREEMPTIBLE_NVIDIA_T4_GPUS"))
    assert line.split()[:6] == ["PREEMPTIBLE_NVIDIA_T4_GPUS", "2", "1", "1", "0", "SHORT"]
    line = next(x for x in table.splitlines() if x.startswith("NVIDIA_T4_GPUS"))
    assert "not listed" in line
    assert "1 quota(s) short: request more at https://console.cloud.google.com/iam-admin/" \
        "quotas?project=my-gcp-project" in table


def test_tpu_types_are_named_as_not_checked(fake):
    fake.cloud.catalogue.zones["us-central1"] = ["us-central1-f"]

    report = check(fake, "tpu")

    assert report.unchecked == ["ray_tpu"]
    assert "not checked: TPU types ray_tpu" in render(report)
