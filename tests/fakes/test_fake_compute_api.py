"""The fake Compute API answers like GCE: its routes and bodies are checked against the Compute
v1 discovery document that google-api-python-client ships, and it is driven here through that
client (the one Ray's GCP node provider uses): filters, label fingerprints, label rules."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from google.oauth2.credentials import Credentials
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.discovery import discovery_document, discovery_methods
from tests.fakes.compute.server import ROUTES

COMPUTE_DOC = discovery_document("compute.v1")
TPU_DOC = discovery_document("tpu.v2")
SERVICE_USAGE_DOC = discovery_document("serviceusage.v1beta1")
# What a gcp provider creates beside nodes (tests/fakes/compute/platform.py), and what
# `invoke catalog-refresh` reads beside Compute and TPU (tests/fakes/compute/listings.py).
PLATFORM_DOCS = [f"{api}.v1" for api in ("cloudresourcemanager", "iam", "serviceusage",
                                         "secretmanager", "cloudbilling")]
PROJECT, ZONE = "my-proj", "us-west1-a"


def _sample_path(template: str) -> str:
    return re.sub(r"\{\+?(\w+)\}", lambda m: f"x{m.group(1).lower()}1", template)


def documented_calls() -> list[tuple[str, str, str]]:
    """(HTTP verb, a concrete path, method id) for every documented Compute and TPU method."""
    calls = [
        (m["httpMethod"], "/compute/v1/" + _sample_path(m["flatPath"]), m["id"])
        for m in discovery_methods("compute.v1").values()
    ]
    calls += [
        (m["httpMethod"], "/" + _sample_path(m["flatPath"]), m["id"])
        for m in discovery_methods("tpu.v2").values()
    ]
    # Service Usage's parent is `projects/{id}` (or folders/, organizations/): {v1beta1Id}.
    calls += [
        (m["httpMethod"], "/" + _sample_path(m["flatPath"].replace("{v1beta1Id}", "projects")),
         m["id"])
        for m in discovery_methods("serviceusage.v1beta1").values()
    ]
    # Their paths start at the API's version: `v1/projects/{projectsId}/...` (Service Usage's
    # parent again `{v1Id}`).
    calls += [
        (m["httpMethod"], "/" + _sample_path(m["flatPath"].replace("{v1Id}", "projects")),
         m["id"])
        for doc in PLATFORM_DOCS
        for m in discovery_methods(doc).values()
    ]
    return calls


def test_every_fake_route_is_a_documented_method_with_the_same_verb() -> None:
    calls = documented_calls()
    for verb, pattern, method in ROUTES:
        matching = [doc_id for doc_verb, path, doc_id in calls
                    if doc_verb == verb and pattern.fullmatch(path)]
        assert matching, f"{verb} {pattern.pattern} ({method}) is no documented method"
        assert any(doc_id.endswith("." + method.rsplit(".", 1)[-1]) for doc_id in matching), (
            f"{method} answers what the document calls {matching}"
        )


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


@pytest.fixture
def compute(fake: FakeComputeServer):
    """The discovery-based client, as Ray's GCP node provider builds it, at the fake."""
    return discovery.build(
        "compute", "v1", credentials=Credentials(token=fake.user_token()),
        static_discovery=True,
        cache_discovery=False,
        client_options={"api_endpoint": f"http://{fake.endpoint}/compute/v1/"},
    )


def _insert(compute, name: str, labels: dict[str, str]) -> None:
    compute.instances().insert(
        project=PROJECT, zone=ZONE, body={"name": name, "labels": labels}
    ).execute()


def _names(compute, expression: str) -> set[str]:
    answer = compute.instances().list(project=PROJECT, zone=ZONE, filter=expression).execute()
    return {item["name"] for item in answer.get("items", [])}


def test_instances_and_operations_carry_only_documented_fields(compute, fake) -> None:
    operation = compute.instances().insert(
        project=PROJECT, zone=ZONE, body={"name": "a", "labels": {"k": "v"}}
    ).execute()
    assert set(operation) <= set(COMPUTE_DOC["schemas"]["Operation"]["properties"])
    done = compute.zoneOperations().get(
        project=PROJECT, zone=ZONE, operation=operation["name"]
    ).execute()
    assert done["status"] == "DONE"
    instance = compute.instances().get(project=PROJECT, zone=ZONE, instance="a").execute()
    assert set(instance) <= set(COMPUTE_DOC["schemas"]["Instance"]["properties"])
    listed = compute.instances().list(project=PROJECT, zone=ZONE).execute()
    assert set(listed) <= set(COMPUTE_DOC["schemas"]["InstanceList"]["properties"])


def test_filters_follow_aip160_with_or_binding_tighter_than_and(compute, fake) -> None:
    _insert(compute, "head", {"ray-node-type": "head", "ray-cluster-name": "c"})
    _insert(compute, "ours", {"ray-node-type": "unmanaged", "ray-cluster-name": "c"})
    _insert(compute, "tpu-shadow", {"ray-node-type": "worker", "ray-cluster-name": "c",
                                    "tpu_cores": "8"})
    _insert(compute, "other", {"ray-node-type": "worker", "ray-cluster-name": "d"})
    fake.cloud.change_instance(PROJECT, ZONE, "other", "stop")
    fake.cloud.settle()

    assert _names(compute, "(labels.ray-cluster-name = c) AND (NOT labels.tpu_cores:*)") == {
        "head", "ours"}
    assert _names(compute, '(labels.ray-cluster-name = "c") (labels.tpu_cores:*)') == {
        "tpu-shadow"}
    assert _names(compute, "(status = RUNNING) OR (status = STAGING) AND "
                           "(labels.ray-node-type = worker)") == {"tpu-shadow"}
    assert _names(compute, "(status = TERMINATED)") == {"other"}
    assert _names(compute, "labels.ray-node-type != head") == {"ours", "tpu-shadow", "other"}
    assert _names(compute, 'name eq "(ours|other)"') == {"ours", "other"}


@pytest.mark.parametrize("expression", [
    "(labels.a = b", "labels.a =", "(name eq a) (status = RUNNING)", "labels.a = b)",
])
def test_malformed_filters_are_refused_with_400(compute, expression: str) -> None:
    with pytest.raises(HttpError) as caught:
        _names(compute, expression)
    assert caught.value.resp.status == 400
    assert "filter" in json.loads(caught.value.content)["error"]["message"]


def test_set_labels_needs_the_current_fingerprint(compute) -> None:
    _insert(compute, "a", {"ray-node-status": "uninitialized"})
    instance = compute.instances().get(project=PROJECT, zone=ZONE, instance="a").execute()
    stale = instance["labelFingerprint"]

    compute.instances().setLabels(project=PROJECT, zone=ZONE, instance="a", body={
        "labels": {"ray-node-status": "up-to-date"}, "labelFingerprint": stale}).execute()
    with pytest.raises(HttpError) as caught:  # someone else changed them since
        compute.instances().setLabels(project=PROJECT, zone=ZONE, instance="a", body={
            "labels": {"ray-node-status": "update-failed"}, "labelFingerprint": stale}).execute()

    assert caught.value.resp.status == 412
    after = compute.instances().get(project=PROJECT, zone=ZONE, instance="a").execute()
    assert after["labels"] == {"ray-node-status": "up-to-date"}
    assert after["labelFingerprint"] != stale


def test_set_metadata_needs_the_current_fingerprint_which_every_write_changes(compute) -> None:
    compute.instances().insert(project=PROJECT, zone=ZONE, body={
        "name": "a", "metadata": {"items": [{"key": "ray-bootstrap-version", "value": "v1"}]},
    }).execute()
    instance = compute.instances().get(project=PROJECT, zone=ZONE, instance="a").execute()
    stale = instance["metadata"]["fingerprint"]
    assert set(instance["metadata"]) <= set(COMPUTE_DOC["schemas"]["Metadata"]["properties"])

    operation = compute.instances().setMetadata(project=PROJECT, zone=ZONE, instance="a", body={
        "fingerprint": stale, "items": [{"key": "ray-bootstrap-version", "value": "v2"}],
    }).execute()
    with pytest.raises(HttpError) as caught:  # someone else changed it since
        compute.instances().setMetadata(project=PROJECT, zone=ZONE, instance="a", body={
            "fingerprint": stale, "items": [{"key": "ray-bootstrap-version", "value": "v3"}],
        }).execute()

    assert operation["operationType"] == "setMetadata"
    assert caught.value.resp.status == 412
    assert json.loads(caught.value.content)["error"]["errors"][0]["reason"] == "conditionNotMet"
    after = compute.instances().get(project=PROJECT, zone=ZONE, instance="a").execute()
    assert after["metadata"]["items"] == [{"key": "ray-bootstrap-version", "value": "v2"}]
    assert after["metadata"]["fingerprint"] != stale


def test_metadata_gce_refuses_is_refused(compute) -> None:
    with pytest.raises(HttpError) as caught:
        compute.instances().insert(project=PROJECT, zone=ZONE, body={
            "name": "a", "metadata": {"items": [{"key": "no spaces", "value": "v"}]},
        }).execute()
    assert caught.value.resp.status == 400


@pytest.mark.parametrize("labels", [{"Upper": "v"}, {"k": "Has Space"}, {"k": "x" * 64},
                                    {f"k{i}": "v" for i in range(65)}])
def test_labels_gce_refuses_are_refused(compute, labels: dict[str, str]) -> None:
    with pytest.raises(HttpError) as caught:
        _insert(compute, "a", labels)
    assert caught.value.resp.status == 400


def test_tpu_quota_listing_carries_only_documented_fields(fake) -> None:
    """Through the discovery client, as `gcloud alpha services quota list` asks."""
    fake.cloud.catalogue.tpu_zone_limits[("tpu-v6e-preemptible", ZONE)] = 64
    usage = discovery.build(
        "serviceusage", "v1beta1", credentials=Credentials(token=fake.user_token()),
        static_discovery=True,
        cache_discovery=False, client_options={"api_endpoint": f"http://{fake.endpoint}/"},
    )
    listed = usage.services().consumerQuotaMetrics().list(
        parent=f"projects/{PROJECT}/services/tpu.googleapis.com", view="BASIC").execute()

    schemas = SERVICE_USAGE_DOC["schemas"]
    assert set(listed) <= set(schemas["ListConsumerQuotaMetricsResponse"]["properties"])
    metric = next(m for m in listed["metrics"]
                  if m["metric"] == "tpu.googleapis.com/tpu-v6e-preemptible")
    assert set(metric) <= set(schemas["ConsumerQuotaMetric"]["properties"])
    (limit,) = metric["consumerQuotaLimits"]
    assert set(limit) <= set(schemas["ConsumerQuotaLimit"]["properties"])
    for bucket in limit["quotaBuckets"]:
        assert set(bucket) <= set(schemas["QuotaBucket"]["properties"])
    assert {"dimensions": {"zone": ZONE}, "effectiveLimit": "64",
            "defaultLimit": "100000"} in limit["quotaBuckets"]


def test_preemptions_are_listed_as_zone_operations_of_their_documented_type(compute, fake):
    """What Google's "list preemption history" sample asks for."""
    _insert(compute, "spot", {})
    _insert(compute, "other", {})
    fake.cloud.preempt(PROJECT, ZONE, "spot", keep=True)

    listed = compute.zoneOperations().list(
        project=PROJECT, zone=ZONE, filter='operationType = "compute.instances.preempted"'
    ).execute()

    assert set(listed) <= set(COMPUTE_DOC["schemas"]["OperationList"]["properties"])
    (operation,) = listed["items"]
    assert set(operation) <= set(COMPUTE_DOC["schemas"]["Operation"]["properties"])
    assert operation["targetLink"].endswith(f"/zones/{ZONE}/instances/spot")
    assert operation["status"] == "DONE" and operation["insertTime"]
    instance = compute.instances().get(project=PROJECT, zone=ZONE, instance="spot").execute()
    assert instance["status"] == "TERMINATED" and instance["lastStopTimestamp"]


@pytest.fixture
def tpu(fake: FakeComputeServer):
    """The TPU v2 discovery client at the fake."""
    return discovery.build(
        "tpu", "v2", credentials=Credentials(token=fake.user_token()),
        static_discovery=True,
        cache_discovery=False, client_options={"api_endpoint": f"http://{fake.endpoint}/"},
    )


def _documented(schema: str) -> set[str]:
    return set(TPU_DOC["schemas"][schema]["properties"])


def test_queued_resources_move_as_documented_and_need_force_while_their_node_lives(tpu, fake):
    """Create, get, list and delete of queued resources, and the node patch a queued slice's
    new startup script goes by."""
    parent = f"projects/{PROJECT}/locations/{ZONE}"
    name = f"{parent}/queuedResources/qr"
    queued = tpu.projects().locations().queuedResources()
    node = {"acceleratorType": "v4-8", "runtimeVersion": "tpu-ubuntu2204-base",
            "labels": {"ray-cluster-name": "c"}, "metadata": {"startup-script": "echo hi"}}
    body = {"tpu": {"nodeSpec": [{"parent": parent, "nodeId": "n1", "node": node}]}, "spot": {}}

    operation = queued.create(parent=parent, queuedResourceId="qr", body=body).execute()
    assert set(operation) <= _documented("Operation")
    states = [queued.get(name=name).execute() for _ in range(3)]
    listed = queued.list(parent=parent).execute()
    created = tpu.projects().locations().nodes().get(name=f"{parent}/nodes/n1").execute()

    assert [s["state"]["state"] for s in states] == ["PROVISIONING", "ACTIVE", "ACTIVE"]
    documented_states = TPU_DOC["schemas"]["QueuedResourceState"]["properties"]["state"]["enum"]
    assert all(s["state"]["state"] in documented_states for s in states)
    assert set(states[-1]) <= _documented("QueuedResource")
    assert set(states[-1]["state"]) <= _documented("QueuedResourceState")
    assert set(listed) <= _documented("ListQueuedResourcesResponse")
    assert [r["name"] for r in listed["queuedResources"]] == [name]
    assert set(created) <= _documented("Node") and created["queuedResource"] == name
    assert created["metadata"] == node["metadata"] and created["labels"] == node["labels"]
    nodes = tpu.projects().locations().nodes()
    nodes.patch(name=f"{parent}/nodes/n1", updateMask="metadata,labels",
                body={"metadata": {"startup-script": "echo new"}, "labels": {"k": "v"}}).execute()
    fake.cloud.settle()
    patched = nodes.get(name=f"{parent}/nodes/n1").execute()
    assert (patched["metadata"], patched["labels"]) == ({"startup-script": "echo new"}, {"k": "v"})
    with pytest.raises(HttpError) as immutable:
        nodes.patch(name=f"{parent}/nodes/n1", updateMask="acceleratorType",
                    body={"acceleratorType": "v4-16"}).execute()
    assert immutable.value.resp.status == 400
    with pytest.raises(HttpError) as refused:
        queued.delete(name=name).execute()
    assert refused.value.resp.status == 400
    queued.delete(name=name, force=True).execute()
    fake.cloud.settle()
    with pytest.raises(HttpError) as gone:
        queued.get(name=name).execute()
    assert gone.value.resp.status == 404
    assert fake.tpu_nodes(PROJECT, ZONE) == {}


@pytest.mark.parametrize("spot", [{"provisioningModel": "SPOT"}, {"preemptible": True}])
def test_a_spot_stockout_fails_spot_inserts_with_gces_body_and_lets_on_demand_through(
        compute, fake, spot) -> None:
    fake.faults.spot_capacity[ZONE] = 0
    fake.faults.stockout_code = "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    operation = compute.instances().insert(
        project=PROJECT, zone=ZONE, body={"name": "s", "scheduling": spot}).execute()
    done = compute.zoneOperations().wait(
        project=PROJECT, zone=ZONE, operation=operation["name"]).execute()
    (error,) = done["error"]["errors"]
    assert error["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    assert "does not have enough resources available to fulfill the request" in error["message"]
    assert set(done["error"]) <= set(COMPUTE_DOC["schemas"]["Operation"]["properties"]["error"]
                                     ["properties"])
    compute.instances().insert(project=PROJECT, zone=ZONE, body={
        "name": "d", "scheduling": {"provisioningModel": "STANDARD"}}).execute()
    assert _names(compute, "") == {"d"}


def test_a_preemptible_standard_instance_is_refused_as_gce_refuses_it(compute) -> None:
    with pytest.raises(HttpError) as refused:
        compute.instances().insert(project=PROJECT, zone=ZONE, body={
            "name": "x", "scheduling": {"provisioningModel": "STANDARD",
                                        "preemptible": True}}).execute()
    assert refused.value.resp.status == 400


def test_rays_list_form_scheduling_is_taken_as_one_object_as_gce_takes_it(compute, fake) -> None:
    """Ray's GCP YAMLs write `scheduling: [{preemptible: true}, ...]`; the instance GCE makes
    has the one Scheduling object of the entries together (tests/fakes/compute/cloud.py,
    one_scheduling); an entry that is no map is refused."""
    compute.instances().insert(project=PROJECT, zone=ZONE, body={
        "name": "listed", "scheduling": [{"preemptible": True},
                                         {"onHostMaintenance": "TERMINATE"}]}).execute()
    made = compute.instances().get(project=PROJECT, zone=ZONE, instance="listed").execute()
    assert made["scheduling"] == {"preemptible": True, "onHostMaintenance": "TERMINATE"}
    with pytest.raises(HttpError) as refused:
        compute.instances().insert(project=PROJECT, zone=ZONE, body={
            "name": "x", "scheduling": ["preemptible"]}).execute()
    assert refused.value.resp.status == 400
