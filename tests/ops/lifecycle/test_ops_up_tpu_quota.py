"""`invoke up` checks the zone's TPU quota for the slices Pulumi keeps before it refreshes or
creates anything: an up that does not fit leaves nothing half-created."""

from __future__ import annotations

import io

import pytest

from ops.cloud.cloud_api import API_ENDPOINT_ENV
from ops.errors import OpsError
from ops.lifecycle import pulumi_cli
from ops.stacks import stack as stack_module
from tests.fakes.compute import FakeComputeServer
from tests.support.recording_stacks import RecordingStack

PROJECT = "my-gcp-project"
ZONE = "us-central1-f"  # stacks/clusters/tpu.yaml: a CPU head and 7 on-demand v2-8 (56 cores)
V2_QUOTA = ("tpu-v2", ZONE)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    with FakeComputeServer() as server:
        server.cloud.catalogue.zones["us-central1"] = [ZONE]
        monkeypatch.setenv(API_ENDPOINT_ENV, server.endpoint)
        yield server


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> RecordingStack:
    recording = RecordingStack()
    monkeypatch.setattr(stack_module, "select_stack", lambda name, create=False: recording)
    return recording


def someone_elses_slice(fake: FakeComputeServer) -> None:
    fake.cloud.create_node(PROJECT, ZONE, "someone-elses",
                           {"runtimeVersion": "tpu-vm-base", "acceleratorType": "v2-8"})


def test_up_is_refused_before_anything_when_the_slices_do_not_fit(fake, stack):
    fake.cloud.catalogue.tpu_zone_limits[V2_QUOTA] = 48
    someone_elses_slice(fake)

    with pytest.raises(OpsError) as refused:
        pulumi_cli.run_operation("tpu", "up", out=io.StringIO())

    message = str(refused.value)
    assert f"tpu-v2 (TensorCores, zone {ZONE}) needs 56, 40 free (limit 48, in use 8) " \
        "for 7 x ray_tpu" in message
    assert "nothing was created" in message and "iam-admin/quotas?project=my-gcp-project" in message
    assert stack.calls == []
    assert list(fake.tpu_nodes(PROJECT, ZONE)) == ["someone-elses"]


def test_up_goes_on_when_the_slices_fit(fake, stack):
    fake.cloud.catalogue.tpu_zone_limits[V2_QUOTA] = 64
    someone_elses_slice(fake)

    pulumi_cli.run_operation("tpu", "up", out=io.StringIO())

    assert [operation for operation, _ in stack.calls] == ["up"]


def test_an_unreadable_tpu_quota_is_said_and_does_not_stop_the_up(fake, stack):
    fake.cloud.catalogue.service_usage_disabled = True
    out = io.StringIO()

    pulumi_cli.run_operation("tpu", "up", out=out)

    assert "warning: TPU quota TPU v2 on-demand TensorCores not checked: Service Usage " \
        "answered 403" in out.getvalue()
    assert [operation for operation, _ in stack.calls] == ["up"]


def test_a_cluster_without_tpus_asks_no_quota_api(fake, stack):
    """The fake answers (the orphan report after the up lists the project there; at a port
    where nothing listens it retried for a minute) and records every request it serves."""
    pulumi_cli.run_operation("gpu-docker", "up", out=io.StringIO())

    assert [operation for operation, _ in stack.calls] == ["up"]
    assert fake.served, "the up's report asked the fake, which records what it serves"
    assert [served.method for served in fake.served
            if served.method.startswith("serviceusage.")] == []
