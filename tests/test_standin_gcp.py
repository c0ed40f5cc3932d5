"""The stand-in gcp plugin keeps the engine's plugin contract, spoken to as the engine speaks
to it: its executable prints a port, then gRPC ResourceProvider calls create, read, diff,
update and delete what the fake cloud holds, refusing what pulumi-gcp's schema refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from tests.fake_compute import FakeComputeServer, Faults

PLUGIN = Path(__file__).parent / "standin_gcp" / "pulumi-resource-gcp"
PROJECT, ZONE = "standin-proj", "us-west1-a"
INSTANCE = "gcp:compute/instance:Instance"
FIREWALL = "gcp:compute/firewall:Firewall"


def urn(token: str, name: str) -> str:
    return f"urn:pulumi:test::proj::{token}::{name}"


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(value)
    return message


def plain(message: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(message)


def endpoints(fake: FakeComputeServer) -> dict[str, str]:
    base = f"http://{fake.endpoint}"
    return {"computeCustomEndpoint": f"{base}/compute/v1/", "tpuV2CustomEndpoint": f"{base}/v2/",
            **{f"{api}CustomEndpoint": f"{base}/v1/"
               for api in ("iam", "resourceManager", "serviceUsage", "secretManager")},
            "project": PROJECT, "zone": ZONE}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


@pytest.fixture(scope="module")
def plugin(fake: FakeComputeServer) -> Iterator[provider_pb2_grpc.ResourceProviderStub]:
    process = subprocess.Popen(
        [str(PLUGIN)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "STANDIN_GCP_PYTHON": sys.executable},
    )
    try:
        port = int(process.stdout.readline())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = provider_pb2_grpc.ResourceProviderStub(channel)
        stub.Configure(provider_pb2.ConfigureRequest(
            args=struct(endpoints(fake)), type="pulumi:providers:gcp", name="default"))
        yield stub
        channel.close()
    finally:
        process.terminate()
        process.wait(timeout=10)


def instance_inputs(name: str, **changes: Any) -> dict[str, Any]:
    return {
        "name": name, "project": PROJECT, "zone": ZONE, "machineType": "n1-standard-2",
        "bootDisk": {"initializeParams": {"image": "projects/debian-cloud/global/images/x",
                                          "size": 50}},
        "networkInterfaces": [{"network": "default", "accessConfigs": [{}]}],
        "metadata": {"startup-script": "echo hi"}, "labels": {"ray-cluster-name": "c"},
        **changes,
    }


def test_plugin_prints_its_port_and_names_the_version_pulumi_gcp_asks_for(plugin) -> None:
    import json

    import pulumi_gcp

    wanted = json.loads((Path(pulumi_gcp.__file__).parent / "pulumi-plugin.json").read_text())
    assert plugin.GetPluginInfo(struct_pb2.Struct()).version == wanted["version"]


def test_check_refuses_what_pulumi_gcp_schema_refuses(plugin) -> None:
    inputs = instance_inputs("bad")
    del inputs["machineType"]
    inputs["bootDisk"]["initializeParams"]["size"] = "fifty"
    inputs["machineTyp"] = "n1-standard-2"
    answer = plugin.Check(provider_pb2.CheckRequest(urn=urn(INSTANCE, "bad"),
                                                    news=struct(inputs), olds=struct({})))
    failures = {f.property: f.reason for f in answer.failures}
    assert failures["machineType"] == "Missing required property 'machineType'"
    assert "bootDisk.initializeParams.size" in failures
    assert "unknown key" in failures["machineTyp"]
    good = plugin.Check(provider_pb2.CheckRequest(urn=urn(INSTANCE, "good"),
                                                  news=struct(instance_inputs("good"))))
    assert not good.failures


def test_instance_is_created_in_the_fake_with_pulumi_gcp_outputs(plugin, fake) -> None:
    answer = plugin.Create(provider_pb2.CreateRequest(
        urn=urn(INSTANCE, "head"), properties=struct(instance_inputs("head-1"))))
    outputs = plain(answer.properties)
    assert answer.id == f"projects/{PROJECT}/zones/{ZONE}/instances/head-1"
    live = fake.instances(PROJECT, ZONE)["head-1"]
    assert outputs["selfLink"] == live["selfLink"]
    assert outputs["networkInterfaces"][0]["networkIp"] == live["networkInterfaces"][0]["networkIP"]
    assert outputs["networkInterfaces"][0]["accessConfigs"][0]["natIp"]
    assert {i["key"]: i["value"] for i in live["metadata"]["items"]} == {
        "startup-script": "echo hi"}


def test_diff_replaces_on_force_new_fields_and_updates_the_rest(plugin) -> None:
    old = instance_inputs("head-2")

    def diff(**changes: Any) -> provider_pb2.DiffResponse:
        return plugin.Diff(provider_pb2.DiffRequest(
            urn=urn(INSTANCE, "head"), id="x", olds=struct(old), old_inputs=struct(old),
            news=struct(instance_inputs("head-2", **changes))))

    bigger_disk = {"initializeParams": {**old["bootDisk"]["initializeParams"], "size": 100}}
    other_image = {"initializeParams": {**old["bootDisk"]["initializeParams"], "image": "y"}}
    assert list(diff(machineType="n1-standard-8").replaces) == []
    assert list(diff(machineType="n1-standard-8").diffs) == ["machineType"]
    assert list(diff(bootDisk=bigger_disk).replaces) == []
    assert list(diff(bootDisk=other_image).replaces) == ["bootDisk"]
    assert list(diff(zone="us-west1-b").replaces) == ["zone"]
    assert diff().changes == provider_pb2.DiffResponse.DIFF_NONE


def test_update_read_and_delete_act_on_the_fake(plugin, fake) -> None:
    inputs = instance_inputs("head-3")
    created = plugin.Create(provider_pb2.CreateRequest(urn=urn(INSTANCE, "h3"),
                                                       properties=struct(inputs)))
    news = instance_inputs("head-3", machineType="n1-standard-8",
                           metadata={"startup-script": "echo bye"})
    plugin.Update(provider_pb2.UpdateRequest(
        urn=urn(INSTANCE, "h3"), id=created.id, olds=created.properties,
        old_inputs=struct(inputs), news=struct(news)))
    live = fake.instances(PROJECT, ZONE)["head-3"]
    assert live["machineType"].endswith("/machineTypes/n1-standard-8")
    assert live["status"] == "RUNNING"
    assert live["metadata"]["items"] == [{"key": "startup-script", "value": "echo bye"}]
    fake.cloud.preempt(PROJECT, ZONE, "head-3")
    gone = plugin.Read(provider_pb2.ReadRequest(urn=urn(INSTANCE, "h3"), id=created.id,
                                                properties=created.properties))
    assert gone.id == ""
    plugin.Delete(provider_pb2.DeleteRequest(urn=urn(INSTANCE, "h3"), id=created.id,
                                             properties=created.properties))


def test_firewall_round_trip(plugin, fake) -> None:
    inputs = {"name": "ray-c-ssh", "project": PROJECT, "network": "default",
              "direction": "INGRESS", "sourceRanges": ["0.0.0.0/0"],
              "allows": [{"protocol": "tcp", "ports": ["22"]}]}
    created = plugin.Create(provider_pb2.CreateRequest(urn=urn(FIREWALL, "ssh"),
                                                       properties=struct(inputs)))
    assert created.id == f"projects/{PROJECT}/global/firewalls/ray-c-ssh"
    assert fake.platform.firewalls[PROJECT]["ray-c-ssh"]["allowed"] == [
        {"IPProtocol": "tcp", "ports": ["22"]}]
    plugin.Delete(provider_pb2.DeleteRequest(urn=urn(FIREWALL, "ssh"), id=created.id,
                                             properties=created.properties))
    assert fake.platform.firewalls[PROJECT] == {}


def test_data_sources_answer_from_the_fake(plugin) -> None:
    project = plugin.Invoke(provider_pb2.InvokeRequest(
        tok="gcp:organizations/getProject:getProject", args=struct({"projectId": PROJECT})))
    assert plain(getattr(project, "return"))["number"] == "123456789012"
    subnets = plugin.Invoke(provider_pb2.InvokeRequest(
        tok="gcp:compute/getSubnetworks:getSubnetworks",
        args=struct({"project": PROJECT, "region": "us-west1"})))
    (subnet,) = plain(getattr(subnets, "return"))["subnetworks"]
    assert subnet["selfLink"].endswith(f"/projects/{PROJECT}/regions/us-west1/subnetworks/default")
