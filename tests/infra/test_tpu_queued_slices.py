"""TPU slices through the queued-resources API (`provider.tpu_queued_resources`): the
QueuedTpuSlice provider driven through google-cloud-tpu's real client against the fake TPU
API, and the program registering it instead of `tpu.V2Vm` under Pulumi's mocks."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest
from google.cloud import tpu_v2

from infra.metadata import HEAD_ADDRESS_KEY
from infra.workers.queued_slice import (
    QueuedSliceError,
    QueuedSliceProvider,
    QueuedTpuSlice,
    QueuedTpuSliceArgs,
)
from model.config import parse_cluster_config
from model.plan import plan_cluster
from ops.lifecycle.preempted import kept_slices, up_replacing_reclaimed
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.helpers import (
    FAST_DEADLINES,
    PROJECT,
    ZONE,
    fast_retry,
    install_registering_mocks,
    tpu_body,
)
from tests.support.program_runs import run_stack, stack_label, stack_yaml
from tests.support.recording_stacks import ExportedStateStack

QUEUED_SLICE = "pulumi-python:dynamic/ray-gcp:QueuedTpuSlice"
LEGACY = "pulumi-python:dynamic:Resource"  # the type all dynamic resources shared before
V2VM = "gcp:tpu/v2Vm:V2Vm"
NAME = "ray-full-worker-0123abcd-tpu"
SCRIPT = "#!/bin/bash\necho join the head"
SECRET = "very-secret-token-value"


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(queued_wait_polls=2)) as server:
        yield server


def slice_props(endpoint: str, **overrides: Any) -> dict[str, Any]:
    body = tpu_body()
    body.update({
        "metadata": {"startup-script": SCRIPT, HEAD_ADDRESS_KEY: "ray-full-head"},
        "schedulingConfig": {"spot": True},
        "serviceAccount": {"email": "w@my-proj.iam.gserviceaccount.com",
                           "scope": ["https://www.googleapis.com/auth/cloud-platform"]},
        "networkConfig": {"network": f"projects/{PROJECT}/global/networks/default",
                          "enableExternalIps": True},
    })
    props: dict[str, Any] = {
        "project": PROJECT, "zone": ZONE, "name": NAME, "body": body, "wait_minutes": 1,
        "valid_until_minutes": 60, "credentials": None, "api_endpoint": endpoint,
    }
    props.update(overrides)
    return props


def provider() -> QueuedSliceProvider:
    return QueuedSliceProvider(retry=fast_retry(), deadlines=FAST_DEADLINES)


def test_queued_path_reaches_active_and_the_node_boots_with_our_metadata_and_labels(fake):
    props = slice_props(fake.endpoint)

    created = provider().create(props)

    assert created.id == f"projects/{PROJECT}/locations/{ZONE}/queuedResources/{NAME}"
    assert created.outs["queued_state"] == "ACTIVE" and created.outs["status"] == "READY"
    assert created.outs["internal_ip"] and created.outs["external_ip"]
    assert fake.cloud.calls["tpu.queuedResources.get"] >= 3, "waited through the queue"
    node = fake.tpu_nodes(PROJECT, ZONE)[NAME]
    assert node["metadata"] == props["body"]["metadata"]
    assert node["labels"] == props["body"]["labels"]
    assert node["serviceAccount"] == props["body"]["serviceAccount"]
    assert node["acceleratorType"] == "v4-8" and node["networkConfig"]["enableExternalIps"]
    assert node["queuedResource"] == created.id
    request = fake.queued.location(PROJECT, ZONE)[NAME]
    assert request["spot"] == {} and "schedulingConfig" not in node, "spot is the request's tier"
    assert request["queueingPolicy"] == {"validUntilDuration": "3600s"}


def test_a_slice_by_accelerator_config_is_queued_with_the_apis_enum(fake):
    props = slice_props(fake.endpoint)
    del props["body"]["acceleratorType"]
    props["body"]["acceleratorConfig"] = {"type": "v4", "topology": "2x2x1"}

    assert provider().create(props).outs["queued_state"] == "ACTIVE"

    config = fake.tpu_nodes(PROJECT, ZONE)[NAME]["acceleratorConfig"]
    # The client sends enums as numbers (`$alt=json;enum-encoding=int`).
    assert tpu_v2.AcceleratorConfig.Type(config["type"]).name == "V4"
    assert config["topology"] == "2x2x1"


def test_past_the_wait_one_error_names_the_state_and_the_next_up_waits_for_the_same_request(
    fake,
):
    fake.faults.queued_wait_polls = None  # no capacity comes
    props = slice_props(fake.endpoint, wait_minutes=0.005)

    with pytest.raises(QueuedSliceError) as caught:
        provider().create(props)

    message = str(caught.value)
    assert "\n" not in message
    assert "WAITING_FOR_RESOURCES" in message and "wait_minutes" in message
    assert "stays queued" in message and "invoke down" in message
    assert NAME in fake.queued.location(PROJECT, ZONE) and not fake.tpu_nodes(PROJECT, ZONE)

    fake.faults.queued_wait_polls = 0  # capacity arrives before the next up
    created = provider().create(slice_props(fake.endpoint))

    assert created.outs["queued_state"] == "ACTIVE"
    assert fake.cloud.calls["tpu.queuedResources.create"] == 1, "no duplicate request"


def test_a_failed_request_is_one_error_with_gcps_reason_and_the_next_up_queues_anew(fake):
    reason = "There is no more capacity in the zone for the requested spot TPU"
    fake.faults.queued_failure = reason

    with pytest.raises(QueuedSliceError) as caught:
        provider().create(slice_props(fake.endpoint))

    assert "FAILED" in str(caught.value) and reason in str(caught.value)
    fake.faults.queued_failure = None
    assert provider().create(slice_props(fake.endpoint)).outs["status"] == "READY"
    assert fake.cloud.calls["tpu.queuedResources.create"] == 2
    assert fake.cloud.calls["tpu.queuedResources.delete"] == 1, "the failed one withdrawn"


def test_a_request_queued_for_an_older_script_keeps_its_place_and_its_node_gets_the_new_one(
    fake,
):
    fake.faults.queued_wait_polls = None
    with pytest.raises(QueuedSliceError):
        provider().create(slice_props(fake.endpoint, wait_minutes=0.002))
    changed = slice_props(fake.endpoint)
    changed["body"]["metadata"]["startup-script"] = "#!/bin/bash\necho a new script"
    fake.faults.queued_wait_polls = 0

    provider().create(changed)

    assert fake.cloud.calls["tpu.queuedResources.create"] == 1, "its place in the queue kept"
    assert fake.tpu_nodes(PROJECT, ZONE)[NAME]["metadata"] == changed["body"]["metadata"]


def test_a_new_startup_script_updates_the_live_node_in_place(fake):
    created = provider().create(slice_props(fake.endpoint))
    news = slice_props(fake.endpoint)
    news["body"]["metadata"]["startup-script"] = "#!/bin/bash\necho a new script"
    news["body"]["labels"]["ray-launch-config"] = "t2"

    assert provider().diff(created.id, created.outs, news).replaces == []
    updated = provider().update(created.id, created.outs, news)

    node = fake.tpu_nodes(PROJECT, ZONE)[NAME]
    assert node["metadata"] == news["body"]["metadata"]
    assert node["labels"] == news["body"]["labels"]
    assert updated.outs["status"] == "READY" and updated.outs["body"] == news["body"]
    assert fake.cloud.calls["tpu.queuedResources.create"] == 1


def test_delete_withdraws_the_request_and_its_node(fake):
    created = provider().create(slice_props(fake.endpoint))

    provider().delete(created.id, created.outs)

    assert not fake.queued.location(PROJECT, ZONE)
    assert not fake.tpu_nodes(PROJECT, ZONE)


def test_refresh_reports_a_reclaimed_slice_and_forgets_a_withdrawn_request(fake):
    created = provider().create(slice_props(fake.endpoint))
    fake.queued.reclaim(PROJECT, ZONE, NAME)

    refreshed = provider().read(created.id, created.outs)

    assert refreshed.id == created.id
    assert refreshed.outs["queued_state"] == "SUSPENDED" and refreshed.outs["status"] == "gone"
    assert refreshed.outs["internal_ip"] is None
    fake.cloud.wait_for(fake.queued.delete(PROJECT, ZONE, NAME, force=False), 5)
    assert provider().read(created.id, created.outs).id is None


def test_opt_in_stack_registers_a_queued_slice_per_kept_slice_instead_of_a_v2vm():
    raw = stack_yaml("tpu-queued")
    run = run_stack("tpu-queued")
    cluster = raw["cluster_name"]
    plan = plan_cluster(parse_cluster_config(copy.deepcopy(raw), "test"))
    head_name = plan.head.instance_name
    assert not run.of_type(V2VM), "no slice is a V2Vm"
    seen = 0
    for group in (g for g in plan.workers if g.kind == "tpu"):
        parent = f"{cluster}-{group.node_type}"
        slices = sorted((r for r in run.of_type(QUEUED_SLICE) if r.parent == parent),
                        key=lambda r: int(r.name.rsplit("-", 1)[1]))
        assert len(slices) == group.count > 0
        for index, resource in enumerate(slices):
            inputs = resource.inputs
            assert inputs["name"] == group.node_name(index)
            assert (inputs["project"], inputs["zone"]) == (plan.project, plan.zone)
            assert inputs["wait_minutes"] == 30 and inputs["valid_until_minutes"] == 360
            assert inputs["body"]["schedulingConfig"] == {"spot": True}
            body = inputs["body"]
            config = group.node_config.body()
            assert body["runtimeVersion"] == config["runtimeVersion"]
            assert body.get("acceleratorType") == config.get("acceleratorType")
            assert body["metadata"][HEAD_ADDRESS_KEY] == head_name
            assert body["metadata"]["startup-script"].startswith("#!")
            labels = dict(body["labels"])
            assert labels.pop("ray-launch-config")
            assert labels.pop("ray-gcp-stack") == stack_label(run)
            assert labels == group.labels
            seen += 1
    assert seen
    workers = [n for n in run.outputs["nodes"] if n["kind"] == "worker"]
    assert {n["status"] for n in workers} == {"READY"} and all(n["internal_ip"] for n in workers)


def test_a_stack_without_the_key_keeps_v2vm_slices():
    run = run_stack("tpu")
    assert run.of_type(V2VM)
    assert not run.of_type(QUEUED_SLICE)


@pytest.mark.parametrize("recorded_type", [QUEUED_SLICE, LEGACY])
def test_invoke_up_replaces_a_queued_slice_whose_node_gcp_reclaimed(fake, recorded_type):
    """Also from a state recorded before the slices had a type of their own: the engine
    honours a replace only of the URN its last up recorded, so one up records it first."""
    run = run_stack("tpu-queued")
    queued = run.of_type(QUEUED_SLICE)
    state = {"resources": [
        {"urn": run.urns[r.name].replace(QUEUED_SLICE, recorded_type), "type": recorded_type,
         "custom": True, "outputs": {**r.inputs, "queued_state": "ACTIVE"}}
        for r in queued
    ]}
    assert len(kept_slices(state)) == len(queued) > 1
    where = {key: queued[0].inputs[key] for key in ("project", "zone")}
    for resource in queued:
        provider().create(slice_props(fake.endpoint, name=resource.inputs["name"], **where))
    reclaimed = queued[0]
    fake.queued.reclaim(where["project"], where["zone"], reclaimed.inputs["name"])
    stack, out = ExportedStateStack(state), io.StringIO()

    replaced = up_replacing_reclaimed(stack, lambda event: None, out,
                                      api_endpoint=fake.endpoint).replaced

    assert replaced == stack.replaced == [run.urns[reclaimed.name]]
    assert stack.calls == ["export", "up --refresh"] + ["up"] * (recorded_type == LEGACY)
    assert f"{reclaimed.inputs['name']} (TPU slice gone)" in out.getvalue()


@pytest.mark.parametrize("value, message", [
    ({"wait_minutes": 0}, "greater than or equal to 1"),
    ({}, "is required"),
    ({"wait_minutes": 5, "wait": 3}, "unknown key"),
    (30, "{wait_minutes: 30}"),
])
def test_a_bad_tpu_queued_resources_setting_is_one_line_naming_its_path(value, message):
    from model.config import ConfigError

    raw = stack_yaml("tpu")
    raw["provider"]["tpu_queued_resources"] = value
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw, "cluster.yaml")
    assert any(path.startswith("provider.tpu_queued_resources") and message in text
               for path, text in caught.value.problems)


def test_a_new_wait_updates_in_place_and_a_new_accelerator_queues_a_new_request():
    olds = slice_props("127.0.0.1:1")
    news = slice_props("127.0.0.1:1", wait_minutes=90, credentials=SECRET)
    bigger = slice_props("127.0.0.1:1")
    bigger["body"]["acceleratorType"] = "v4-16"

    in_place = provider().diff("id", olds, news)
    replaced = provider().diff("id", olds, bigger)

    assert in_place.changes and not in_place.replaces
    assert replaced.replaces == ["body"]
    assert not provider().diff("id", olds, dict(olds)).changes
    assert provider().update("id", {**olds, "status": "READY"}, news).outs["status"] == "READY"


@pulumi.runtime.test
def test_queued_slice_credentials_are_secret_and_not_in_the_pickled_provider():
    mocks = install_registering_mocks()
    request = QueuedTpuSlice("slice", QueuedTpuSliceArgs(
        project=PROJECT, zone=ZONE, name=NAME, body=tpu_body(), wait_minutes=30,
        credentials=pulumi.Output.from_input(SECRET)))

    def check(secret: bool) -> None:
        assert secret, "credentials must stay a secret output"
        (args,) = [a for a in mocks.registered if a.name == "slice"]
        assert args.typ == QUEUED_SLICE and args.inputs["name"] == NAME
        assert SECRET not in json.dumps(args.inputs.get("__provider", ""))

    return pulumi.Output.from_input(request.credentials.is_secret()).apply(check)


def test_the_setting_without_a_tpu_worker_type_is_a_warning_not_silence():
    raw = stack_yaml("full")
    raw["provider"]["tpu_queued_resources"] = {"wait_minutes": 30}
    warnings = parse_cluster_config(raw, "cluster.yaml").warnings
    assert any(w.startswith("provider.tpu_queued_resources: no worker type is a TPU")
               for w in warnings)
    assert not parse_cluster_config(stack_yaml("tpu-queued"), "cluster.yaml").warnings
