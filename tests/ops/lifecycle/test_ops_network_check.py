"""`invoke preflight` and `invoke up` read the network's firewall rules (and a private
cluster's subnet) from the Compute API and name what admits more than the cluster's own rules."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from model.config import load_cluster_config, parse_cluster_config
from ops.cloud.cloud_api import API_ENDPOINT_ENV
from ops.lifecycle import pulumi_cli
from ops.lifecycle.apis import quota_apis
from ops.lifecycle.network_check import network_warnings
from ops.stacks import stack as stack_module
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import fast_retry
from tests.support.recording_stacks import RecordingStack

CLUSTERS = Path(__file__).resolve().parents[3] / "stacks" / "clusters"
PROJECT = "my-gcp-project"
NETWORK = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/global/networks/default"


def rule(name: str, ranges: list[str], ports: list[str] | None = None, **extra) -> dict:
    allowed = {"IPProtocol": "tcp", **({"ports": ports} if ports is not None else {})}
    return {"kind": "compute#firewall", "name": name, "network": NETWORK, "direction": "INGRESS",
            "priority": 1000, "sourceRanges": ranges, "allowed": [allowed], **extra}


# GCP's stock rules of the `default` network, and the cluster's own.
DEFAULT_ALLOW_SSH = rule("default-allow-ssh", ["0.0.0.0/0"], ["22"])
DEFAULT_ALLOW_INTERNAL = rule("default-allow-internal", ["10.128.0.0/9"], ["0-65535"])
OWN_SSH = rule("ray-private-ssh", ["35.235.240.0/20"], ["22"], targetTags=["ray-private-head"])


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer() as server:
        yield server


def warnings_for(fake: FakeComputeServer, cluster: str) -> list[str]:
    config = load_cluster_config(CLUSTERS / f"{cluster}.yaml")
    return network_warnings(config, quota_apis(config, fake.endpoint, fast_retry()))


def test_the_stock_ssh_rule_is_named_as_wider_than_the_private_clusters_own(fake):
    fake.cloud.catalogue.private_google_access["us-central1"] = True
    fake.cloud.catalogue.firewalls += [
        DEFAULT_ALLOW_SSH, OWN_SSH,
        rule("allow-iap", ["35.235.240.0/20"], ["22"]),
        rule("old-open-ssh", ["0.0.0.0/0"], ["22"], disabled=True),
        rule("other-team-ssh", ["0.0.0.0/0"], ["22"], targetTags=["their-vms"]),
        {**DEFAULT_ALLOW_SSH, "name": "other-network-ssh",
         "network": NETWORK.replace("/default", "/other")},
    ]

    (line,) = warnings_for(fake, "private")

    assert line.startswith("firewall rule default-allow-ssh admits SSH to the head from "
                           "0.0.0.0/0, wider than the cluster's own ray-private-ssh "
                           "(35.235.240.0/20)")
    assert f"gcloud compute firewall-rules delete default-allow-ssh --project={PROJECT}" in line


def test_a_rule_opening_a_ray_port_to_the_cluster_is_named_with_the_port(fake):
    fake.cloud.catalogue.private_google_access["us-central1"] = True
    fake.cloud.catalogue.firewalls += [
        rule("open-dashboard", ["0.0.0.0/0"], ["8000-8300"], targetTags=["ray-private"]),
        DEFAULT_ALLOW_INTERNAL,
        rule("web", ["0.0.0.0/0"], ["80", "443"]),
    ]

    found = warnings_for(fake, "private")

    assert [line.split(" from")[0] for line in found] == [
        "firewall rule default-allow-internal admits SSH to the head",
        "firewall rule default-allow-internal admits Ray's ports 6379 (GCS), 8076 (object "
        "manager), 8265 (dashboard), 10001 (Ray client)",
        "firewall rule open-dashboard admits Ray's ports 8076 (object manager), 8265 (dashboard)"]
    assert "8265 (dashboard) from 0.0.0.0/0, where the cluster's own ray-private-internal " \
           "admits them only between its nodes" in found[2]


def test_a_private_subnet_without_private_google_access_says_how_to_turn_it_on(fake):
    (line,) = warnings_for(fake, "private")
    assert line.startswith("subnet default of us-central1 has no Private Google Access")
    assert ("`gcloud compute networks subnets update default --region=us-central1 "
            f"--enable-private-ip-google-access --project={PROJECT}`") in line
    assert fake.cloud.calls["subnetworks.list"] == 1


def test_a_public_cluster_is_not_told_about_private_google_access(fake):
    assert warnings_for(fake, "full") == []


def test_invoke_up_prints_the_wider_rule_before_it_refreshes(fake, monkeypatch):
    fake.cloud.catalogue.firewalls.append(DEFAULT_ALLOW_SSH)
    fake.cloud.catalogue.private_google_access["us-central1"] = True
    monkeypatch.setenv(API_ENDPOINT_ENV, fake.endpoint)
    stack = RecordingStack()
    monkeypatch.setattr(stack_module, "select_stack", lambda name, create=False: stack)
    out = io.StringIO()

    pulumi_cli.run_operation("private", "up", out=out)

    (line,) = [x for x in out.getvalue().splitlines() if x.startswith("warning:")]
    assert "firewall rule default-allow-ssh admits SSH to the head from 0.0.0.0/0" in line
    assert [operation for operation, _ in stack.calls] == ["up"]


def test_a_subnet_named_in_the_yaml_is_read_with_subnetworks_get(fake):
    raw = yaml.safe_load((CLUSTERS / "private.yaml").read_text())
    for node_type in raw["available_node_types"].values():
        if "machineType" in node_type["node_config"]:
            node_type["node_config"]["networkInterfaces"] = [
                {"subnetwork": "regions/us-central1/subnetworks/default"}]
    config = parse_cluster_config(raw)
    (line,) = network_warnings(config, quota_apis(config, fake.endpoint, fast_retry()))
    assert line.startswith("subnet default of us-central1 has no Private Google Access")
    assert (fake.cloud.calls["subnetworks.get"], fake.cloud.calls["subnetworks.list"]) == (1, 0)
