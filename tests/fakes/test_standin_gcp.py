"""The stand-in gcp plugin keeps the engine's plugin contract, spoken to as the engine speaks
to it: its executable prints a port, then gRPC ResourceProvider calls create, read, diff,
update and delete what the fake cloud holds, refusing what pulumi-gcp's schema refuses."""

from __future__ import annotations

import base64
import hashlib
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

from tests.fakes.compute import FakeComputeServer, Faults

PLUGIN = Path(__file__).parent / "standin_gcp" / "pulumi-resource-gcp"
PROJECT, ZONE = "standin-proj", "us-west1-a"
INSTANCE = "gcp:compute/instance:Instance"
FIREWALL = "gcp:compute/firewall:Firewall"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_READER = "gcp:storage/bucketIAMMember:BucketIAMMember"
BUCKET_OBJECT = "gcp:storage/bucketObject:BucketObject"
ROUTER, ROUTER_NAT = "gcp:compute/router:Router", "gcp:compute/routerNat:RouterNat"
# How the engine hands a provider an asset (sdk/go/common/resource/asset.go: the signature key,
# the asset signature, its hash and its path or text).
SIG_KEY, ASSET_SIG = "4dabf18193072939515e22adb298388d", "c44067f5952c0a294b673a41bacd8c17"


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
            "storageCustomEndpoint": f"{base}/storage/v1/",
            "accessToken": fake.user_token(),
            "project": PROJECT, "zone": ZONE, "region": "us-west1"}


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


KIND = provider_pb2.PropertyDiff


def test_diff_details_each_changed_leaf_at_its_path_as_the_bridge_does(plugin) -> None:
    """pulumi-terraform-bridge's detailed diff (pkg/tfbridge/detailed_diff.go): one entry per
    changed leaf at the engine's property path, replace or not by the field's ForceNew."""
    old = instance_inputs("head-3", metadata={"startup-script": "echo hi",
                                               "ray-bootstrap-config": "min: 0"})

    def details(**changes: Any) -> dict[str, int]:
        answer = plugin.Diff(provider_pb2.DiffRequest(
            urn=urn(INSTANCE, "head"), id="x", olds=struct(old), old_inputs=struct(old),
            news=struct({**old, **changes})))
        assert answer.hasDetailedDiff
        return {path: diff.kind for path, diff in answer.detailedDiff.items()}

    # google_compute_instance's `metadata` is a plain map, not ForceNew: a key changes in place
    assert details(metadata={**old["metadata"], "ray-bootstrap-config": "min: 1"}) == {
        'metadata["ray-bootstrap-config"]': KIND.UPDATE}
    # boot_disk.initialize_params: `size` resizes, `image` is ForceNew
    assert details(bootDisk={"initializeParams": {
        **old["bootDisk"]["initializeParams"], "size": 100, "image": "y"}}) == {
        "bootDisk.initializeParams.size": KIND.UPDATE,
        "bootDisk.initializeParams.image": KIND.UPDATE_REPLACE}
    # a list element's field, by index; a label added
    assert details(networkInterfaces=[{"network": "other", "accessConfigs": [{}]}],
                   labels={**old["labels"], "team": "ml"}) == {
        "networkInterfaces[0].network": KIND.UPDATE, "labels.team": KIND.ADD}
    # a block added whole replaces when it sets a ForceNew field (scheduling.preemptible)
    assert details(scheduling={"preemptible": True}) == {"scheduling": KIND.ADD_REPLACE}
    assert details(scheduling={"automaticRestart": False}) == {"scheduling": KIND.ADD}
    # a value a preview cannot know yet: replaced where its field is ForceNew
    unknown = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    assert details(zone=unknown, machineType=unknown) == {
        "zone": KIND.UPDATE_REPLACE, "machineType": KIND.UPDATE}


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


def file_asset(path: Path) -> dict[str, Any]:
    return {SIG_KEY: ASSET_SIG, "path": str(path),
            "hash": hashlib.sha256(path.read_bytes()).hexdigest()}


def test_bucket_its_reader_and_a_file_asset_object_round_trip(plugin, fake, tmp_path) -> None:
    archive = tmp_path / "mounts.tar.gz"
    archive.write_bytes(bytes(range(256)) * 3)
    bucket = plugin.Create(provider_pb2.CreateRequest(urn=urn(BUCKET, "b"), properties=struct({
        "name": "ray-c-b1", "project": PROJECT, "location": "us-west1", "forceDestroy": True,
        "uniformBucketLevelAccess": True, "publicAccessPrevention": "enforced"})))
    outputs = plain(bucket.properties)
    assert bucket.id == "ray-c-b1" and outputs["url"] == "gs://ray-c-b1"
    assert outputs["selfLink"] == "https://www.googleapis.com/storage/v1/b/ray-c-b1"
    assert fake.storage.buckets["ray-c-b1"]["location"] == "US-WEST1"
    member = "serviceAccount:sa@standin-proj.iam.gserviceaccount.com"
    reader = plugin.Create(provider_pb2.CreateRequest(
        urn=urn(BUCKET_READER, "r"), properties=struct(
            {"bucket": "ray-c-b1", "role": "roles/storage.objectViewer", "member": member})))
    assert reader.id == f"b/ray-c-b1/roles/storage.objectViewer/{member}"
    assert plain(reader.properties)["etag"] == fake.storage.policies["ray-c-b1"]["etag"]
    stored = plugin.Create(provider_pb2.CreateRequest(
        urn=urn(BUCKET_OBJECT, "o"), properties=struct(
            {"bucket": "ray-c-b1", "name": "file-mounts/x.tar.gz",
             "source": file_asset(archive)})))
    assert stored.id == "ray-c-b1-file-mounts/x.tar.gz"
    assert fake.storage.objects[("ray-c-b1", "file-mounts/x.tar.gz")] == archive.read_bytes()
    assert plain(stored.properties)["md5hash"] == base64.b64encode(
        hashlib.md5(archive.read_bytes()).digest()).decode()  # noqa: S324
    assert plain(stored.properties)["outputName"] == "file-mounts/x.tar.gz"
    plugin.Delete(provider_pb2.DeleteRequest(urn=urn(BUCKET_READER, "r"), id=reader.id,
                                             properties=reader.properties))
    assert fake.storage.policies["ray-c-b1"]["bindings"] == []
    # force_destroy: the bucket goes with the object still in it.
    plugin.Delete(provider_pb2.DeleteRequest(urn=urn(BUCKET, "b"), id=bucket.id,
                                             properties=bucket.properties))
    assert "ray-c-b1" not in fake.storage.buckets and not fake.storage.objects


def test_an_object_is_replaced_when_its_source_changes_and_not_for_content(plugin,
                                                                           tmp_path) -> None:
    one, two = tmp_path / "1", tmp_path / "2"
    one.write_text("one")
    two.write_text("two")
    old = {"bucket": "b", "name": "o", "source": file_asset(one)}

    def replaces(**changes: Any) -> list[str]:
        return list(plugin.Diff(provider_pb2.DiffRequest(
            urn=urn(BUCKET_OBJECT, "o"), id="b-o", olds=struct(old), old_inputs=struct(old),
            news=struct({**old, **changes}))).replaces)

    assert replaces(source=file_asset(two)) == ["source"]
    assert replaces(name="p") == ["name"]
    assert replaces() == []
    texts = {"bucket": "b", "name": "o", "content": "one"}
    assert list(plugin.Diff(provider_pb2.DiffRequest(
        urn=urn(BUCKET_OBJECT, "o"), id="b-o", olds=struct(texts), old_inputs=struct(texts),
        news=struct({**texts, "content": "two"}))).replaces) == []


def test_a_nat_is_an_element_of_its_routers_nats(plugin, fake) -> None:
    router = plugin.Create(provider_pb2.CreateRequest(urn=urn(ROUTER, "r"), properties=struct(
        {"name": "ray-c-router", "project": PROJECT, "region": "us-west1",
         "network": "default"})))
    assert router.id == f"projects/{PROJECT}/regions/us-west1/routers/ray-c-router"
    nat_inputs = {"name": "ray-c-nat", "project": PROJECT, "region": "us-west1",
                  "router": "ray-c-router", "natIpAllocateOption": "AUTO_ONLY",
                  "sourceSubnetworkIpRangesToNat": "LIST_OF_SUBNETWORKS",
                  "subnetworks": [{"name": "default", "sourceIpRangesToNats": ["ALL_IP_RANGES"]}]}
    nat = plugin.Create(provider_pb2.CreateRequest(urn=urn(ROUTER_NAT, "n"),
                                                   properties=struct(nat_inputs)))
    assert nat.id == f"{PROJECT}/us-west1/ray-c-router/ray-c-nat"
    live = fake.platform.routers[(PROJECT, "us-west1")]["ray-c-router"]
    assert live["nats"] == [{"name": "ray-c-nat", "natIpAllocateOption": "AUTO_ONLY",
                             "sourceSubnetworkIpRangesToNat": "LIST_OF_SUBNETWORKS",
                             "subnetworks": [{"name": "default",
                                              "sourceIpRangesToNat": ["ALL_IP_RANGES"]}]}]
    plugin.Delete(provider_pb2.DeleteRequest(urn=urn(ROUTER_NAT, "n"), id=nat.id,
                                             properties=nat.properties))
    assert fake.platform.routers[(PROJECT, "us-west1")]["ray-c-router"]["nats"] == []
    plugin.Delete(provider_pb2.DeleteRequest(urn=urn(ROUTER, "r"), id=router.id,
                                             properties=router.properties))
    assert fake.platform.routers[(PROJECT, "us-west1")] == {}
