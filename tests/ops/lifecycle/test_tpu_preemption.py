"""`invoke up` replaces TPU slices GCP reclaimed: the stack's slices (URNs as the program
registers them) checked through the real google-cloud-tpu client against the fake TPU API."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from ops.lifecycle.preempted import kept_slices, up_replacing_reclaimed
from ops.review.plan_engine import ProgramRun
from ops.stacks.stack import cluster_credentials
from tests.fakes.compute import FakeComputeServer
from tests.support.program_runs import run_inline, run_stack, stack_yaml
from tests.support.recording_stacks import ExportedStateStack

V2VM = "gcp:tpu/v2Vm:V2Vm"


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        yield server


def exported_state(run: ProgramRun) -> dict[str, Any]:
    """What `pulumi stack export` holds for the run's V2Vms: URN, type and outputs."""
    return {"resources": [
        {"urn": run.urns[vm.name], "type": V2VM, "custom": True,
         "outputs": {**vm.inputs, "state": "READY"}}
        for vm in run.of_type(V2VM)
    ]}


def start(fake: FakeComputeServer, vm_inputs: dict[str, Any]) -> None:
    operation = fake.cloud.create_node(vm_inputs["project"], vm_inputs["zone"], vm_inputs["name"],
                                       {"labels": vm_inputs["labels"]})
    fake.cloud.wait_for(operation, 5)


def test_preempted_and_vanished_slices_are_replaced_in_the_same_up(fake):
    run = run_stack("tpu")
    slices = sorted(run.of_type(V2VM), key=lambda r: r.name)
    assert len(slices) == 7
    for vm in slices[:-1]:  # the last slice is gone: GCP deleted it
        start(fake, vm.inputs)
    preempted = slices[1].inputs
    fake.cloud.preempt_node(preempted["project"], preempted["zone"], preempted["name"])
    stack, out = ExportedStateStack(exported_state(run)), io.StringIO()

    replaced = up_replacing_reclaimed(stack, lambda event: None, out,
                                      api_endpoint=fake.endpoint).replaced

    assert stack.calls == ["export", "up --refresh"], "one up, which refreshes first"
    assert stack.replaced == replaced == [run.urns[slices[1].name], run.urns[slices[-1].name]]
    assert f"{preempted['name']} (TPU slice PREEMPTED)" in out.getvalue()
    assert f"{slices[-1].inputs['name']} (TPU slice gone)" in out.getvalue()
    assert fake.cloud.calls["tpu.list"] == 1, "one list call for the zone"


def test_nothing_is_replaced_while_every_slice_is_ready(fake):
    run = run_stack("tpu-pod")
    for vm in run.of_type(V2VM):
        start(fake, vm.inputs)
    stack = ExportedStateStack(exported_state(run))
    assert up_replacing_reclaimed(stack, lambda event: None, io.StringIO(),
                                  api_endpoint=fake.endpoint).replaced == []
    assert stack.replaced is None


def test_a_preempted_tpu_head_and_nodes_of_other_stacks_are_left_alone(fake):
    raw = stack_yaml("tpu-pod-topology")
    raw["available_node_types"][raw["head_node_type"]] = {
        "resources": {"TPU": 4},
        "node_config": raw["available_node_types"]["ray_tpu"]["node_config"]}
    run = run_inline(raw)
    state = exported_state(run)
    (head,) = [vm for vm in run.of_type(V2VM) if vm.parent == "tputopology-head"]
    (worker,) = kept_slices(state)
    for vm in run.of_type(V2VM):
        start(fake, vm.inputs)
        fake.cloud.preempt_node(vm.inputs["project"], vm.inputs["zone"], vm.inputs["name"])
    # A replaced slice's old copy, still pending delete, is not a slice to replace again.
    (entry,) = [r for r in state["resources"] if r["urn"] == worker.urn]
    state["resources"].append({**entry, "delete": True})
    stack = ExportedStateStack(state)

    up_replacing_reclaimed(stack, lambda event: None, io.StringIO(), api_endpoint=fake.endpoint)

    assert stack.replaced == [worker.urn]
    assert run.urns[head.name] not in stack.replaced


def test_a_tpu_api_refusal_is_one_warning_and_the_up_still_runs(fake):
    run = run_stack("tpu-pod")
    fake.faults.fail_next(403, methods={"tpu.list"})
    stack, out = ExportedStateStack(exported_state(run)), io.StringIO()

    up_replacing_reclaimed(stack, lambda event: None, out, api_endpoint=fake.endpoint)

    assert stack.calls == ["export", "up --refresh"] and stack.replaced is None
    (line,) = out.getvalue().splitlines()
    assert "could not ask the TPU API" in line and "replaces none" in line


def test_the_tpu_api_is_asked_with_the_stacks_own_credentials():
    raw = stack_yaml("tpu")
    token = "ya29.a-token-from-the-yaml"
    raw["provider"]["gcp_credentials"] = {"type": "credentials_token", "credentials": token}
    inline = {"ray-gcp:clusterConfig": json.dumps(raw)}
    assert cluster_credentials(inline) == token
    assert cluster_credentials({"ray-gcp:cluster": "stacks/clusters/tpu.yaml"}) is None
