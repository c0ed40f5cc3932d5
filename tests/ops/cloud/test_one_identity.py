"""One identity for every Google call: with a token-only cluster YAML and no Application
Default Credentials anywhere, every day-two task that calls an API calls it with the YAML's
token (the fake records each request's Authorization header)."""

from __future__ import annotations

import io
from collections.abc import Iterator

import paramiko
import pytest
import yaml

from ops.cloud.cloud_api import API_ENDPOINT_ENV, StackApi
from ops.cloud.kill_node import kill_random_node
from ops.cloud.preemptions import preemption_lines
from ops.cloud.status import head_stopped_note
from ops.lifecycle.down_workers import delete_autoscaler_workers
from ops.remote.host_keys import COMPUTE_ENDPOINT_ENV, published_host_keys
from ops.remote.ssh import Connector
from ops.stacks.stack import StackOutputs, parse_outputs, stack_credentials
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.identity import USER, USER_SCOPES

PROJECT, ZONE, FAILOVER_ZONE = "my-proj", "us-west1-a", "us-west1-b"
TOKEN = "ya29.only-the-yamls-token"
BEARER = f"Bearer {TOKEN}"


@pytest.fixture
def fake(monkeypatch, tmp_path) -> Iterator[FakeComputeServer]:
    """The fake APIs, and no ADC: no key file variable, a HOME without gcloud's files."""
    for variable in ("GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG",
                     "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(variable, raising=False)
    home = tmp_path / "empty-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        server.identities.mint(USER, USER_SCOPES, token=TOKEN)  # the user's token, in the YAML
        monkeypatch.setenv(API_ENDPOINT_ENV, server.endpoint)
        monkeypatch.setenv(COMPUTE_ENDPOINT_ENV, server.endpoint)
        yield server


def token_outputs(tmp_path) -> StackOutputs:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({
        "cluster_name": "c",
        "provider": {"type": "gcp", "region": "us-west1", "availability_zone": ZONE,
                     "project_id": PROJECT,
                     "gcp_credentials": {"type": "credentials_token", "credentials": TOKEN}},
    }))
    nodes = [
        {"name": "c-head", "node_type": "ray_head_default", "kind": "head",
         "internal_ip": "10.0.0.2", "status": "RUNNING"},
        {"name": "c-worker", "node_type": "ray_worker_small", "kind": "worker",
         "internal_ip": "10.0.0.3", "status": "RUNNING", "zone": FAILOVER_ZONE},
    ]
    key = io.StringIO()
    paramiko.ECDSAKey.generate().write_private_key(key)
    return parse_outputs("one-identity", {
        "cluster_name": "c", "head_name": "c-head", "project": PROJECT, "zone": ZONE,
        "head_internal_ip": "10.0.0.2", "ssh_user": "u", "ssh_private_key": key.getvalue(),
        "cluster_config_file": str(cluster), "nodes": nodes})


def calls_with(fake: FakeComputeServer) -> set[str]:
    return set(fake.authorizations)


def test_the_yamls_token_is_the_stacks_credentials(tmp_path):
    assert stack_credentials(token_outputs(tmp_path)) == TOKEN


def test_status_asks_for_preemptions_and_the_stopped_head_with_the_yamls_token(fake, tmp_path):
    outputs = token_outputs(tmp_path)
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "c-head", {"ray-cluster-name": "c"})

    api = StackApi(outputs, fake.endpoint)
    preemption_lines(api)
    head_stopped_note(api)

    assert fake.authorizations and calls_with(fake) == {BEARER}


def test_kill_random_node_hard_deletes_in_the_nodes_zone_with_the_yamls_token(fake, tmp_path):
    outputs = token_outputs(tmp_path)
    fake.cloud.add_foreign_instance(PROJECT, FAILOVER_ZONE, "c-worker", {"ray-cluster-name": "c"})
    connector = Connector(outputs, known_hosts=tmp_path / "known_hosts",
                          announce=io.StringIO())

    killed = kill_random_node(connector, yes=True, hard=True, choose=lambda nodes: nodes[0])

    assert killed is not None and killed.name == "c-worker"
    assert "c-worker" not in fake.instances(PROJECT, FAILOVER_ZONE)
    assert calls_with(fake) == {BEARER}


def test_down_workers_only_deletes_the_autoscalers_workers_with_the_yamls_token(fake, tmp_path):
    outputs = token_outputs(tmp_path)
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "c-autoscaled", {
        "ray-cluster-name": "c", "ray-node-type": "worker"})

    deleted = delete_autoscaler_workers(outputs.project, outputs.zone, outputs.cluster_name,
                                        credentials=stack_credentials(outputs))

    assert deleted == ["c-autoscaled"]
    assert calls_with(fake) == {BEARER}


@pytest.mark.parametrize("api", ["compute", "tpu"])
def test_the_host_key_lookup_asks_with_the_yamls_token_in_the_nodes_zone(fake, tmp_path, api):
    outputs = token_outputs(tmp_path)
    name = f"c-worker-{api}"
    fake.guest_attributes[(PROJECT, FAILOVER_ZONE, name)] = {
        "hostkeys/ssh-ed25519": "AAAAC3NzaC1lZDI1NTE5AAAAIpublished\n"}

    published = published_host_keys(PROJECT, FAILOVER_ZONE, name, api,
                                    stack_credentials(outputs))

    assert published.keys == {"AAAAC3NzaC1lZDI1NTE5AAAAIpublished"}
    assert calls_with(fake) == {BEARER}
    assert fake.cloud.calls["tpu.getGuestAttributes" if api == "tpu" else "getGuestAttributes"]
