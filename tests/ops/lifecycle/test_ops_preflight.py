"""`invoke preflight`: the largest cluster against the region's quotas, read-only, as a table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from model.config import load_cluster_config
from model.stack_config import cluster_path_for_stack
from ops.lifecycle.preflight import preflight, render
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import fast_retry

CLUSTERS = Path(__file__).resolve().parents[3] / "stacks" / "clusters"
PROJECT = "my-gcp-project"


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


TPU_ZONE = "us-central1-f"
V2_ROW = f"tpu-v2 (TensorCores, zone {TPU_ZONE})"


@pytest.fixture
def tpu_fake(fake: FakeComputeServer) -> FakeComputeServer:
    fake.cloud.catalogue.zones["us-central1"] = [TPU_ZONE]
    return fake


def add_slice(fake: FakeComputeServer, name: str, body: dict) -> None:
    fake.cloud.create_node(PROJECT, TPU_ZONE, name, {"runtimeVersion": "tpu-vm-base", **body})


def tpu_stack_check(fake: FakeComputeServer):
    """The tpu stack's cluster (stacks/Pulumi.tpu.yaml): a CPU head and 7 on-demand v2-8."""
    config = load_cluster_config(cluster_path_for_stack("tpu"))
    return preflight(config, api_endpoint=fake.endpoint, retry=fast_retry())


def test_tpu_stack_counts_its_slices_cores_against_the_zones_tpu_quota(tpu_fake):
    tpu_fake.cloud.catalogue.tpu_zone_limits[("tpu-v2", TPU_ZONE)] = 72
    add_slice(tpu_fake, "someone-elses", {"acceleratorType": "v2-8"})
    add_slice(tpu_fake, "by-topology", {"acceleratorConfig": {"type": "V2", "topology": "2x2"}})
    add_slice(tpu_fake, "spot-one", {"acceleratorType": "v2-8",
                                     "schedulingConfig": {"spot": True}})  # other quota
    add_slice(tpu_fake, "ours-tpu", {"acceleratorType": "v2-8",  # already in the 56 needed
                                     "labels": {"ray-cluster-name": "tputest"}})

    report = tpu_stack_check(tpu_fake)

    row = next(row for row in report.rows if row.metric == V2_ROW)
    assert (row.needed, row.limit, row.usage, row.free) == (56, 72, 16, 56)
    assert not row.short
    assert report.users[V2_ROW] == ["7 x ray_tpu"]
    assert report.unchecked == []
    assert sum(tpu_fake.cloud.calls[m] for m in ("bulkInsert", "insert", "tpu.create")) == 0


def test_short_tpu_quota_is_refused_naming_needed_and_free(tpu_fake):
    tpu_fake.cloud.catalogue.tpu_zone_limits[("tpu-v2", TPU_ZONE)] = 48
    add_slice(tpu_fake, "someone-elses", {"acceleratorType": "v2-8"})

    report = tpu_stack_check(tpu_fake)
    table = render(report)

    assert [row.metric for row in report.short] == [V2_ROW]
    line = next(x for x in table.splitlines() if x.startswith("tpu-v2 "))
    assert line.split()[4:10] == ["56", "40", "48", "8", "SHORT", "7"]
    assert "1 quota(s) short: request more at https://console.cloud.google.com/iam-admin/" \
        "quotas?project=my-gcp-project" in table
    assert "gcloud alpha services quota list --service=tpu.googleapis.com " \
        "--consumer=projects/my-gcp-project" in table


def test_unreadable_tpu_quota_is_unknown_not_short(tpu_fake):
    tpu_fake.cloud.catalogue.service_usage_disabled = True

    report = tpu_stack_check(tpu_fake)

    (row,) = [row for row in report.rows if row.metric.startswith("TPU ")]
    assert row.metric == "TPU v2 on-demand TensorCores"
    assert row.limit is None and not row.short
    assert row.note == "unknown"
    assert row.why.startswith("Service Usage answered 403: Service Usage API has not been used "
                              "in project my-gcp-project")
    table = render(report).splitlines()
    assert next(x for x in table if x.startswith("TPU v2")).split()[4:9] == [
        "56", "-", "-", "-", "unknown"]
    assert f"TPU v2 on-demand TensorCores: unknown: {row.why}" in table


def test_topology_slice_needs_its_cores_from_the_v4_quota(tpu_fake):
    """V4 2x2x1 is 4 chips, 8 TensorCores; the listing's v4 metric is found by its name."""
    tpu_fake.cloud.catalogue.zones["us-central2"] = ["us-central2-b"]
    tpu_fake.cloud.catalogue.tpu_zone_limits[("tpu-v4", "us-central2-b")] = 4

    report = check(tpu_fake, "tpu-pod-topology")

    row = next(row for row in report.rows if row.metric.startswith("tpu-v4"))
    assert row.metric == "tpu-v4 (TensorCores, zone us-central2-b)"
    assert (row.needed, row.limit, row.short) == (8, 4, True)


def test_preflight_task_exits_1_with_the_table_when_the_tpu_quota_is_short(
        tpu_fake, monkeypatch, capsys):
    from invoke import Collection, Program

    import tasks

    tpu_fake.cloud.catalogue.tpu_zone_limits[("tpu-v2", TPU_ZONE)] = 8
    monkeypatch.setenv("RAY_GCP_API_ENDPOINT", tpu_fake.endpoint)

    with pytest.raises(SystemExit) as exited:
        Program(namespace=Collection.from_module(tasks)).run(["invoke", "preflight", "-s", "tpu"])

    assert exited.value.code == 1
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("tpu-v2 "))
    assert line.split()[4:9] == ["56", "8", "8", "0", "SHORT"]


def test_types_the_zone_does_not_offer_are_named_from_the_live_api(fake):
    """The catalog says a name exists; only the live API knows what a zone has today."""
    fake.cloud.catalogue.unoffered["us-west1-b"] = {"nvidia-tesla-t4"}  # gpu-docker's zone

    report = check(fake, "gpu-docker")

    assert report.unoffered == ["GPU nvidia-tesla-t4 (ray_head_gpu)",
                                "GPU nvidia-tesla-t4 (ray_worker_gpu)"]
    assert report.rows == [] or all(row.metric != "NVIDIA_T4_GPUS" for row in report.rows)
    assert "zone us-west1-b does not offer GPU nvidia-tesla-t4 (ray_head_gpu)" in render(report)


def test_a_tpu_type_the_zone_does_not_offer_is_named(tpu_fake):
    tpu_fake.cloud.catalogue.unoffered[TPU_ZONE] = {"v2-8"}

    report = tpu_stack_check(tpu_fake)

    assert report.unoffered == ["TPU type v2-8 (ray_tpu)"]
    assert not any(row.metric == V2_ROW for row in report.rows)


def test_a_machine_type_the_zone_does_not_offer_fails_the_task(fake, monkeypatch, capsys):
    from invoke import Collection, Program

    import tasks

    fake.cloud.catalogue.unoffered["us-west1-a"] = {"n1-standard-2"}
    monkeypatch.setenv("RAY_GCP_API_ENDPOINT", fake.endpoint)

    with pytest.raises(SystemExit) as exited:
        Program(namespace=Collection.from_module(tasks)).run(
            ["invoke", "preflight", "-s", "minimal"])

    assert exited.value.code == 1
    assert "does not offer machine type n1-standard-2" in capsys.readouterr().out
