"""The fake's VPC networks and subnetworks refuse what Compute refuses (tests/fakes/compute/
vpc.py cites each rule), driven through the discovery client Ray's GCP node provider uses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from google.oauth2.credentials import Credentials
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from tests.fakes.compute import FakeComputeServer, Faults

PROJECT, REGION, ZONE = "my-proj", "us-west1", "us-west1-a"
NETWORK = f"projects/{PROJECT}/global/networks/platform"
SUBNET = f"projects/{PROJECT}/regions/{REGION}/subnetworks/ray-nodes"


@pytest.fixture
def compute() -> Iterator:
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        yield discovery.build(
            "compute", "v1", credentials=Credentials(token=fake.user_token()),
            static_discovery=True, cache_discovery=False,
            client_options={"api_endpoint": f"http://{fake.endpoint}/compute/v1/"})


def _network(compute, name: str = "platform", auto: bool = False) -> None:
    compute.networks().insert(project=PROJECT, body={
        "name": name, "autoCreateSubnetworks": auto}).execute()


def _subnet(compute, name: str = "ray-nodes", cidr: str = "10.10.0.0/24",
            network: str = NETWORK, region: str = REGION) -> None:
    compute.subnetworks().insert(project=PROJECT, region=region, body={
        "name": name, "network": network, "ipCidrRange": cidr}).execute()


def _instance(compute, name: str, nics: list[dict[str, str]]) -> None:
    compute.instances().insert(project=PROJECT, zone=ZONE, body={
        "name": name, "networkInterfaces": nics}).execute()


def _refusal(call) -> tuple[int, str, str]:
    with pytest.raises(HttpError) as caught:
        call()
    error = caught.value
    return error.resp.status, error.error_details[0]["reason"], str(error.reason)


def test_an_instance_joins_a_created_subnet_and_names_its_network(compute):
    _network(compute)
    _subnet(compute)
    _instance(compute, "a", [{"subnetwork": SUBNET}])
    nic = compute.instances().get(project=PROJECT, zone=ZONE, instance="a").execute()[
        "networkInterfaces"][0]
    assert nic["network"].endswith(NETWORK) and nic["subnetwork"] == SUBNET
    listed = compute.subnetworks().list(project=PROJECT, region=REGION).execute()["items"]
    assert [s["name"] for s in listed] == ["default", "ray-nodes"]


@pytest.mark.parametrize(("nics", "wanted"), [
    ([{"network": "projects/my-proj/global/networks/nope"}],
     "The referenced network resource cannot be found"),
    ([{"subnetwork": "regions/us-west1/subnetworks/nope"}],
     "The referenced subnetwork resource cannot be found"),
    ([{"network": NETWORK}], "Subnetwork should be specified for custom subnetmode network"),
    ([{"network": "global/networks/default", "subnetwork": SUBNET}],
     "Subnetwork does not belong to network"),
])
def test_an_instance_on_a_missing_or_mismatched_network_is_refused(compute, nics, wanted):
    _network(compute)
    _subnet(compute)
    status, reason, message = _refusal(lambda: _instance(compute, "a", nics))
    assert (status, reason) == (400, "invalid") and wanted in message


def test_a_subnet_of_another_region_than_the_instance_is_refused(compute):
    _network(compute)
    _subnet(compute, "far", region="europe-west4")
    status, _, message = _refusal(lambda: _instance(
        compute, "a", [{"subnetwork": f"projects/{PROJECT}/regions/europe-west4/subnetworks/far"}]))
    assert status == 400 and "same region as the instance" in message


def test_subnet_ranges_of_one_network_do_not_overlap_and_need_their_network(compute):
    _network(compute)
    _subnet(compute)
    status, _, message = _refusal(lambda: _subnet(compute, "again", "10.10.0.128/25"))
    assert status == 400 and "conflicts with existing subnetwork 'ray-nodes'" in message
    status, reason, _ = _refusal(lambda: _subnet(
        compute, "orphan", network=f"projects/{PROJECT}/global/networks/nope"))
    assert (status, reason) == (404, "notFound")
    status, reason, _ = _refusal(lambda: _network(compute))
    assert (status, reason) == (409, "alreadyExists")


def test_a_network_or_subnet_in_use_is_not_deleted(compute):
    _network(compute)
    _subnet(compute)
    _instance(compute, "a", [{"network": NETWORK, "subnetwork": SUBNET}])
    delete_subnet = compute.subnetworks().delete(project=PROJECT, region=REGION,
                                                 subnetwork="ray-nodes")
    status, reason, message = _refusal(delete_subnet.execute)
    assert (status, reason) == (400, "resourceInUseByAnotherResource")
    assert message.endswith("/instances/a'")
    delete_network = compute.networks().delete(project=PROJECT, network="platform")
    status, reason, message = _refusal(delete_network.execute)
    assert (status, reason) == (400, "resourceInUseByAnotherResource")
    assert "subnetworks/ray-nodes" in message

    compute.instances().delete(project=PROJECT, zone=ZONE, instance="a").execute()
    delete_subnet.execute()
    compute.networks().delete(project=PROJECT, network="platform").execute()
    status, reason, _ = _refusal(
        compute.networks().get(project=PROJECT, network="platform").execute)
    assert (status, reason) == (404, "notFound")


def test_a_firewall_rule_needs_its_network_and_keeps_it(compute):
    _network(compute, "auto", auto=True)
    rule = {"name": "ray", "network": f"projects/{PROJECT}/global/networks/auto",
            "allowed": [{"IPProtocol": "tcp"}]}
    compute.firewalls().insert(project=PROJECT, body=rule).execute()
    status, reason, _ = _refusal(compute.firewalls().insert(project=PROJECT, body={
        **rule, "name": "other", "network": "global/networks/nope"}).execute)
    assert (status, reason) == (404, "notFound")
    status, reason, message = _refusal(
        compute.networks().delete(project=PROJECT, network="auto").execute)
    assert (status, reason) == (400, "resourceInUseByAnotherResource")
    assert message.endswith("/global/firewalls/ray'")
