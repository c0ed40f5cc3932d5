"""A network another stack owns, taken by `ray-gcp:networkStack` (a StackReference): every
node, worker body and firewall rule of the cluster uses the referenced network and subnet, no
subnet is looked up, and a bad reference stops the run with one line naming the stack. The
plan's engine answers the StackReference with the outputs a network stack would export (the
engine test, tests/engine/test_engine_network_stack.py, reads a real one)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from infra.cluster_args import INLINE_SOURCE, ClusterConfigError, RayClusterArgs, prepare_cluster
from infra.dynamic_types import WORKER_GROUP_TYPE
from model.config import ConfigError
from ops.review import plan_engine
from tests.support.program_runs import stack_yaml

HOST = "net-host-project"
NETWORK = f"projects/{HOST}/global/networks/shared-vpc"
SUBNET = f"projects/{HOST}/regions/us-west1/subnetworks/ray-nodes"
SELF_LINK = "https://www.googleapis.com/compute/v1/"


@pytest.fixture
def network_stack(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The outputs the referenced stack exports (the test fills them in), and the stack names
    the program asked for."""
    exported: dict[str, Any] = {"outputs": {}, "asked": []}
    answer = plan_engine.RecordingMocks.new_resource

    def new_resource(self: plan_engine.RecordingMocks, args: pulumi.runtime.MockResourceArgs):
        if args.typ == "pulumi:pulumi:StackReference":
            exported["asked"].append(args.inputs["name"])
            return args.inputs["name"], {"name": args.inputs["name"],
                                         "outputs": exported["outputs"], "secretOutputNames": []}
        return answer(self, args)

    monkeypatch.setattr(plan_engine.RecordingMocks, "new_resource", new_resource)
    return exported


def run_with(cluster: dict[str, Any], network_stack: str = "acme/network/prod"
             ) -> plan_engine.ProgramRun:
    """The program for the cluster, its network from `network_stack` (a plain string in the
    stack's config, as `pulumi config set ray-gcp:networkStack acme/network/prod` writes it)."""
    return plan_engine.run_program({"ray-gcp:clusterConfig": json.dumps(cluster),
                                    "ray-gcp:networkStack": network_stack}, stack="test")


def _interfaces(run: plan_engine.ProgramRun) -> list[Any]:
    heads = [r.inputs["networkInterfaces"] for r in run.of_type("gcp:compute/instance:Instance")]
    bodies = [r.inputs["body"]["networkInterfaces"] for r in run.of_type(WORKER_GROUP_TYPE)]
    return heads + bodies


def test_every_node_and_firewall_uses_the_network_stacks_network_and_subnet(network_stack):
    network_stack["outputs"] = {"network": SELF_LINK + NETWORK, "subnetwork": SELF_LINK + SUBNET}
    run = run_with(stack_yaml("full"))

    assert network_stack["asked"] == ["acme/network/prod"]
    interfaces = _interfaces(run)
    assert len(interfaces) == 1 + len(run.of_type(WORKER_GROUP_TYPE)) > 1
    for nics in interfaces:
        assert [(nic["network"], nic["subnetwork"]) for nic in nics] == [(NETWORK, SUBNET)]
    firewalls = run.of_type("gcp:compute/firewall:Firewall")
    assert firewalls and {f.inputs["network"] for f in firewalls} == {NETWORK}
    # The cluster stack makes no network of its own.
    assert not run.of_type("gcp:compute/network:Network")
    assert not run.of_type("gcp:compute/subnetwork:Subnetwork")
    assert (run.outputs["network"], run.outputs["subnetwork"]) == (NETWORK, SUBNET)


def test_tpu_nodes_join_the_network_stacks_subnet(network_stack):
    subnet = f"projects/{HOST}/regions/us-central1/subnetworks/tpus"
    network_stack["outputs"] = {"network": "shared-vpc", "subnetwork": subnet}
    run = run_with(stack_yaml("tpu"))
    tpus = run.of_type("gcp:tpu/v2Vm:V2Vm")
    assert tpus and all(
        (t.inputs["networkConfig"]["network"], t.inputs["networkConfig"]["subnetwork"])
        == ("projects/my-gcp-project/global/networks/shared-vpc", subnet) for t in tpus)


def test_a_network_stack_without_a_subnet_gives_the_network_alone(network_stack):
    network_stack["outputs"] = {"network": "global/networks/auto-vpc"}
    run = run_with(stack_yaml("minimal"))
    for nics in _interfaces(run):
        assert [nic["network"] for nic in nics] == [
            "projects/my-gcp-project/global/networks/auto-vpc"]
        assert all(not nic.get("subnetwork") for nic in nics)


@pytest.mark.parametrize(("outputs", "wanted"), [
    ({"subnetwork": SUBNET},
     "ray-gcp:networkStack: stack acme/network/prod's output `network` is missing"),
    ({"network": NETWORK, "subnetwork": SUBNET.replace("us-west1", "europe-west4")},
     "is in region europe-west4, the cluster in us-west1"),
    ({"network": "projects/p/regions/us-west1/subnetworks/s"}, "is not a VPC network"),
])
def test_a_bad_network_stack_output_stops_the_run_in_one_line(network_stack, outputs, wanted):
    network_stack["outputs"] = outputs
    with pytest.raises(pulumi.RunError) as caught:
        run_with(stack_yaml("minimal"))
    message = str(caught.value)
    assert wanted in message and "\n" not in message, message
    assert message.startswith("ray-gcp:networkStack: stack acme/network/prod's output")


def test_a_yaml_naming_its_network_too_is_refused_naming_both(network_stack):
    raw = stack_yaml("full")
    for node_type in raw["available_node_types"].values():
        node_type["node_config"]["networkInterfaces"] = [{"network": "global/networks/x"}]
    with pytest.raises(ConfigError) as caught:
        run_with(raw)
    assert "ray-gcp:networkStack" in str(caught.value)
    assert "networkInterfaces" in str(caught.value)
    assert network_stack["asked"] == []


def test_the_offline_plan_shows_the_network_stacks_values_as_known_after_up():
    """Offline (`invoke plan`, the PR's diff) the other stack is not read: a plan says so
    where its values go, and is JSON as any other."""
    run = run_with(stack_yaml("minimal"))
    assert run.outputs["network"] == run.outputs["subnetwork"] == plan_engine.KNOWN_AFTER_UP
    (head,) = run.of_type("gcp:compute/instance:Instance")
    assert head.inputs["networkInterfaces"] == plan_engine.KNOWN_AFTER_UP
    assert json.dumps([r.inputs for r in run.resources], default=str) and json.dumps(
        run.outputs)


def test_the_component_refuses_a_network_given_twice_naming_the_argument_and_the_yaml():
    raw = stack_yaml("full")
    for node_type in raw["available_node_types"].values():
        node_type["node_config"]["networkInterfaces"] = [{"network": "global/networks/x"}]
    with pytest.raises(ClusterConfigError) as caught:
        prepare_cluster(RayClusterArgs(config=raw, network=NETWORK))
    message = str(caught.value)
    assert message.startswith(f"invalid cluster config {INLINE_SOURCE}:")
    assert "RayClusterArgs.network: the YAML names the network too (available_node_types." in \
        message
