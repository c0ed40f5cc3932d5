"""A platform team's network stack feeds a cluster stack by StackReference, through the
pulumi CLI and the language host double, against the fake cloud and the stand-in gcp plugin:

- a tiny network project in a temp folder (`gcp.compute.Network` in custom mode and its
  `Subnetwork`s) exports `network` and `subnetwork`;
- this project's own program (a copy of the repository, Pulumi.yaml as it is) takes them with
  `ray-gcp:networkStack: organization/net/prod` in its stack file;
- the cluster's head joins the referenced subnet and its firewall rules guard the referenced
  network; a change of the network stack's `subnetwork` output shows in the cluster's
  preview as the head's interface changing, and nothing else of the network;
- destroying the cluster leaves the network and its subnets, which the network stack can then
  delete (the fake refuses to delete a network or subnet still in use).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_cli import CliProject
from tests.support.engine_stack import EngineWorkspace, cluster_nodes, urn_type

pytestmark = pytest.mark.slow  # four engine runs and two previews: minutes on a loaded machine

PROJECT, REGION, ZONE = "my-gcp-project", "us-west1", "us-west1-a"
NETWORK = f"projects/{PROJECT}/global/networks/platform"
SUBNET_A = f"projects/{PROJECT}/regions/{REGION}/subnetworks/ray-a"
SUBNET_B = f"projects/{PROJECT}/regions/{REGION}/subnetworks/ray-b"
CLUSTER_STACK = "shared-net"
NETWORK_PROGRAM = f'''\
import pulumi
import pulumi_gcp as gcp

network = gcp.compute.Network("platform", name="platform", project="{PROJECT}",
                              auto_create_subnetworks=False)
subnets = {{
    name: gcp.compute.Subnetwork(name, name=name, project="{PROJECT}", region="{REGION}",
                                 network=network.id, ip_cidr_range=cidr)
    for name, cidr in (("ray-a", "10.10.0.0/24"), ("ray-b", "10.10.1.0/24"))
}}
pulumi.export("network", network.id)
pulumi.export("subnetwork", subnets[pulumi.Config().get("nodes") or "ray-a"].id)
'''


@pytest.fixture
def stacks(engine_bin: Path, tmp_path: Path) -> Iterator[tuple[CliProject, CliProject,
                                                               FakeComputeServer]]:
    """(the network project, this project's copy, the fake cloud), on one backend."""
    folder = tmp_path / "net"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text(yaml.safe_dump({
        "name": "net", "runtime": {"name": "python", "options": {"virtualenv": sys.prefix}}}))
    (folder / "__main__.py").write_text(NETWORK_PROGRAM)
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, engine_bin, root=tmp_path / "engine")
        yield CliProject(space, folder), CliProject(space), fake


def _interface(fake: FakeComputeServer, cluster: str) -> dict[str, Any]:
    (head,) = [node for node in cluster_nodes(fake, PROJECT, ZONE, cluster).values()
               if node["labels"].get("ray-node-type") == "head"]
    return head["networkInterfaces"][0]


def _steps(cluster: CliProject) -> dict[str, dict[str, Any]]:
    """`pulumi preview --json --diff`'s steps by resource name, what is unchanged left out."""
    preview = json.loads(cluster.run("preview", "--json", "--diff", "--stack",
                                     CLUSTER_STACK).stdout)
    return {step["urn"].rsplit("::", 1)[1]: step for step in preview.get("steps") or []
            if step["op"] != "same"}


def test_a_cluster_stack_joins_the_network_another_stack_owns(stacks) -> None:
    network, cluster, fake = stacks
    network.run("stack", "init", "prod", *network.space.init_options())
    # Every up here skips its own preview (the program run twice), as a platform team's CI runs
    # them once the preview was read: the cluster's preview is the one `_steps` reads below.
    network.run("up", "--yes", "--skip-preview", "--stack", "prod")

    settings = yaml.safe_load((cluster.folder / "stacks/Pulumi.minimal.yaml").read_text())
    cluster_name = yaml.safe_load((cluster.folder / settings["config"]["ray-gcp:cluster"])
                                  .read_text())["cluster_name"]
    (cluster.folder / "stacks" / f"Pulumi.{CLUSTER_STACK}.yaml").write_text(yaml.safe_dump(
        {"config": {**settings["config"], "ray-gcp:networkStack": "organization/net/prod"}}))
    cluster.run("stack", "init", CLUSTER_STACK, *cluster.space.init_options())
    cluster.run("up", "--yes", "--skip-preview", "--stack", CLUSTER_STACK)

    nic = _interface(fake, cluster_name)
    assert nic["network"].endswith(NETWORK) and nic["subnetwork"].endswith(SUBNET_A), nic
    rules = fake.platform.firewalls[PROJECT]
    assert rules and {rule["network"] for rule in rules.values()} == {NETWORK}
    outputs = json.loads(cluster.run("stack", "output", "--json", "--stack",
                                     CLUSTER_STACK).stdout)
    assert (outputs["network"], outputs["subnetwork"]) == (NETWORK, SUBNET_A)
    deployment = cluster.export(CLUSTER_STACK)
    network_types = ("gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork")
    assert not [r for r in deployment["resources"] if r["type"] in network_types]

    # The network stack now hands out its other subnet: the cluster's preview shows the head's
    # interface moving to it, the firewall rules (same network) unchanged.
    network.run("config", "set", "nodes", "ray-b", "--stack", "prod")
    network.run("up", "--yes", "--skip-preview", "--stack", "prod")
    changed = _steps(cluster)
    shown = {name: (step["op"], urn_type(step["urn"]), sorted(step.get("detailedDiff") or {}))
             for name, step in changed.items()}
    (head,) = [step for step in changed.values()
               if urn_type(step["urn"]) == "gcp:compute/instance:Instance"]
    assert "networkInterfaces[0].subnetwork" in (head.get("detailedDiff") or {}), shown
    assert not [name for name, (_, kind, _) in shown.items()
                if kind == "gcp:compute/firewall:Firewall"], shown

    # A destroy's preview plans the same deletes from the state (no program run): skipped.
    cluster.run("destroy", "--yes", "--skip-preview", "--stack", CLUSTER_STACK)
    assert cluster_nodes(fake, PROJECT, ZONE, cluster_name) == {}
    assert fake.platform.firewalls[PROJECT] == {}
    assert {s["name"] for s in fake.cloud.vpc.region_subnetworks(PROJECT, REGION)} >= {
        "ray-a", "ray-b"}
    assert fake.cloud.vpc.network(PROJECT, "platform") is not None  # the network stays
    # nothing of the cluster holds it
    network.run("destroy", "--yes", "--skip-preview", "--stack", "prod")
    assert fake.cloud.vpc.network(PROJECT, "platform") is None
