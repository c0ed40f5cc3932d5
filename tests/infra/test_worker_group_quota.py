"""Quota pre-flight: a group the region's quotas cannot hold is refused before any insert, with
the quota's name, what is needed, what is free and where to ask for more."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.workers import WorkerGroupError
from infra.workers.quota import QuotaShortError, body_needs, gpu_metric
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import (
    PROJECT,
    ZONE,
    fast_provider,
    gpu_body,
    group_props,
)


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        yield server


def nothing_was_inserted(fake: FakeComputeServer) -> bool:
    return (fake.cloud.calls["bulkInsert"] + fake.cloud.calls["insert"] == 0
            and fake.instances(PROJECT, ZONE) == {})


def test_short_preemptible_cpu_quota_is_refused_before_any_insert(fake):
    fake.cloud.catalogue.quota_limits["PREEMPTIBLE_CPUS"] = 24
    fake.cloud.catalogue.quota_usage["PREEMPTIBLE_CPUS"] = 20

    with pytest.raises(QuotaShortError) as failure:
        fast_provider().create(group_props(fake.endpoint, 3))

    message = str(failure.value)
    assert "region us-west1 of project my-proj" in message
    assert "PREEMPTIBLE_CPUS needs 6, 4 free (limit 24, in use 20)" in message
    assert f"https://console.cloud.google.com/iam-admin/quotas?project={PROJECT}" in message
    assert "Nothing was created" in message
    assert nothing_was_inserted(fake)


def test_without_a_preemptible_quota_preemptible_vcpus_count_against_cpus(fake):
    fake.cloud.catalogue.quota_limits["PREEMPTIBLE_CPUS"] = 0
    fake.cloud.catalogue.quota_limits["CPUS"] = 4

    with pytest.raises(QuotaShortError, match="CPUS needs 6, 4 free"):
        fast_provider().create(group_props(fake.endpoint, 3))
    assert nothing_was_inserted(fake)


def test_short_gpu_and_instance_quotas_are_all_named(fake):
    body = gpu_body(2)
    fake.cloud.catalogue.quota_limits.update({"NVIDIA_T4_GPUS": 4, "INSTANCES": 10})
    fake.cloud.catalogue.quota_usage["INSTANCES"] = 9

    with pytest.raises(QuotaShortError) as failure:
        fast_provider().create(group_props(fake.endpoint, 3, body=body))

    assert "NVIDIA_T4_GPUS needs 6, 4 free" in str(failure.value)
    assert "INSTANCES needs 3, 1 free" in str(failure.value)
    assert nothing_was_inserted(fake)


def test_enough_quota_creates_and_a_scale_up_checks_only_the_new_workers(fake):
    fake.cloud.catalogue.quota_limits["PREEMPTIBLE_CPUS"] = 4
    provider = fast_provider()
    outs = provider.create(group_props(fake.endpoint, 2)).outs
    fake.cloud.catalogue.quota_usage["PREEMPTIBLE_CPUS"] = 4

    with pytest.raises(QuotaShortError, match="PREEMPTIBLE_CPUS needs 2, 0 free"):
        provider.update("id", outs, group_props(fake.endpoint, 3))
    assert len(fake.instances(PROJECT, ZONE)) == 2


def test_needs_by_metric_follow_gce_quota_names():
    body = {
        "machineType": "zones/us-west1-a/machineTypes/n2-standard-8",
        "guestAccelerators": [{"acceleratorType": "nvidia-a100-80gb", "acceleratorCount": 2}],
        "disks": [
            {"boot": True, "initializeParams": {"diskSizeGb": 50,
                                                "diskType": "zones/us-west1-a/diskTypes/pd-ssd"}},
            {"type": "SCRATCH", "initializeParams": {"diskType": "local-ssd"}},
            {"initializeParams": {"diskSizeGb": 200}},
        ],
    }
    quotas = {"N2_CPUS": (100.0, 0.0), "CPUS": (100.0, 0.0)}

    assert dict(body_needs(body, 2, 8, quotas)) == {
        "INSTANCES": 2, "N2_CPUS": 16, "NVIDIA_A100_80GB_GPUS": 4, "SSD_TOTAL_GB": 100,
        "LOCAL_SSD_TOTAL_GB": 750, "DISKS_TOTAL_GB": 400}
    assert gpu_metric("projects/p/zones/z/acceleratorTypes/nvidia-tesla-t4") == "NVIDIA_T4_GPUS"
    assert gpu_metric("nvidia-h100-80gb") == "NVIDIA_H100_GPUS"
    assert gpu_metric("nvidia-l4") == "NVIDIA_L4_GPUS"


def test_gpu_and_cpu_metrics_are_names_the_compute_api_knows():
    """Against compute.v1's discovery document: a misspelt metric would never be found short."""
    from tests.fakes.compute.discovery import discovery_document

    known = set(discovery_document("compute.v1")["schemas"]["Quota"]["properties"]["metric"]
                ["enum"])
    gpus = ["nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4",
            "nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-l4", "nvidia-h100-80gb"]
    for name in gpus:  # the enum lags (no plain NVIDIA_H100_GPUS); its variants spell the name
        assert {f"COMMITTED_{gpu_metric(name)}", f"PREEMPTIBLE_{gpu_metric(name)}"} <= known, name
    body = {"machineType": "c2-standard-4", "disks": [{"type": "SCRATCH"}],
            "scheduling": {"provisioningModel": "SPOT"}}
    granted = {metric: (10.0, 0.0) for metric in known}
    assert set(body_needs(body, 1, 4, granted)) <= known


def test_a_machine_type_the_zone_does_not_offer_is_named_before_any_insert(fake):
    fake.cloud.catalogue.unoffered[ZONE] = {"n1-standard-2"}

    with pytest.raises(WorkerGroupError, match=r"n1-standard-2.*was not found: check the "
                       r"machine type \(n1-standard-2\) against `gcloud compute machine-types"):
        fast_provider().create(group_props(fake.endpoint, 1))
    assert nothing_was_inserted(fake)
