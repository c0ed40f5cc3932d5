"""The program under Pulumi's mocks: every shipped stack registers the resources SPEC asks for,
with the exact pulumi-gcp inputs derived from its unchanged Ray cluster YAML."""

from __future__ import annotations

import pytest
import yaml

from bootstrap.head_provider.pinned import PROVIDER_FIELD as PINNED_TYPES_FIELD
from tests.support.program_runs import STACKS, head_config_text, run_stack, stack_yaml

SPEC_ROLES = {
    "roles/storage.objectAdmin",
    "roles/compute.admin",
    "roles/iam.serviceAccountUser",
    "roles/iam.roleViewer",
}
HEAD_ROLES = {"roles/compute.admin"}
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
INSTANCE = "gcp:compute/instance:Instance"
WORKER_GROUP = "pulumi-python:dynamic/ray-gcp:WorkerGroup"
TPU_VM = "gcp:tpu/v2Vm:V2Vm"


def is_tpu(node_config: dict) -> bool:
    return "acceleratorType" in node_config or "acceleratorConfig" in node_config


def worker_types(raw: dict) -> dict[str, dict]:
    head = raw.get("head_node_type", "ray_head_default")
    # A minimal YAML gets Ray's GCP default worker: preemptible n1-standard-2, none at first.
    default_worker = {"min_workers": 0, "node_config": {
        "machineType": "n1-standard-2", "scheduling": [{"preemptible": True}]}}
    types = raw.get("available_node_types") or {"ray_worker_small": default_worker}
    return {name: t for name, t in types.items() if name != head}


@pytest.mark.parametrize("stack", STACKS)
def test_head_and_worker_accounts_hold_only_what_their_nodes_need(stack: str):
    """The head: Ray's autoscaler account with the project roles its autoscaler needs to
    create and delete workers (none of Ray's storage.objectAdmin, project-wide
    serviceAccountUser or roleViewer), actAs on the worker account only. Workers: the
    cluster's own account, no project role, reading only this cluster's token and bucket."""
    run, raw = run_stack(stack), stack_yaml(stack)
    project, cluster = raw["provider"]["project_id"], raw["cluster_name"]
    accounts = {a.inputs["accountId"] for a in run.of_type("gcp:serviceaccount/account:Account")}
    assert accounts == {"ray-autoscaler-sa-v1", f"ray-{cluster}-worker"}
    head = f"serviceAccount:ray-autoscaler-sa-v1@{project}.iam.gserviceaccount.com"
    worker = f"serviceAccount:ray-{cluster}-worker@{project}.iam.gserviceaccount.com"
    members = run.of_type("gcp:projects/iAMMember:IAMMember")
    roles = {m.inputs["role"] for m in members if m.inputs["member"] == head}
    has_tpu = any(is_tpu(t["node_config"]) for t in worker_types(raw).values())
    assert roles == HEAD_ROLES | ({"roles/tpu.admin"} if has_tpu else set())
    assert not roles & (SPEC_ROLES - HEAD_ROLES)
    # Anyone else is granted only OS Login's role, and only when the YAML asks for it.
    os_login = raw["provider"].get("os_login")
    others = [(m.inputs["member"], m.inputs["role"]) for m in members
              if m.inputs["member"] != head]
    assert others == ([(os_login["principal"], "roles/compute.osAdminLogin")] if os_login else [])
    acts_as = [(m.inputs["serviceAccountId"], m.inputs["member"])
               for m in run.of_type("gcp:serviceaccount/iAMMember:IAMMember")
               if m.inputs["role"] == "roles/iam.serviceAccountUser" and m.inputs["member"] == head]
    assert acts_as == [(f"projects/{project}/serviceAccounts/{worker.split(':')[1]}", head)]
    secrets = {m.inputs["secretId"] for m in
               run.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")
               if m.inputs["member"] == worker}
    assert secrets == {f"ray-{cluster}-auth-token"}
    buckets = {(m.inputs["bucket"], m.inputs["role"]) for m in
               run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
               if m.inputs["member"] == worker}
    (bucket,) = run.of_type("gcp:storage/bucket:Bucket")
    assert buckets == {(bucket.inputs["name"], "roles/storage.objectViewer")}


@pytest.mark.parametrize("stack", STACKS)
def test_head_instance_inputs_come_from_the_yaml(stack: str):
    run, raw = run_stack(stack), stack_yaml(stack)
    zone, project = raw["provider"]["availability_zone"], raw["provider"]["project_id"]
    (head,) = run.of_type(INSTANCE)
    head_type = raw.get("head_node_type", "ray_head_default")
    node_config = (raw.get("available_node_types") or {}).get(head_type, {}).get(
        "node_config", {"machineType": "n1-standard-2"})
    # The bare name the provider stores, so a second `up` shows no diff.
    assert head.inputs["machineType"] == node_config["machineType"]
    assert head.inputs["zone"] == zone and head.inputs["project"] == project
    cluster = raw["cluster_name"]
    assert head.inputs["name"].startswith(f"ray-{cluster}-head-")
    assert head.inputs["name"].endswith("-compute") and len(head.inputs["name"]) <= 63
    assert head.inputs["labels"]["ray-cluster-name"] == cluster
    assert head.inputs["labels"]["ray-node-type"] == "head"
    assert head.inputs["labels"]["ray-node-name"] == f"ray-{cluster}-head"
    assert head.inputs["labels"]["ray-user-node-type"] == head_type
    assert head.inputs["labels"]["ray-launch-config"]
    assert head.inputs["serviceAccount"] == {
        "email": f"ray-autoscaler-sa-v1@{project}.iam.gserviceaccount.com",
        "scopes": [CLOUD_PLATFORM]}
    private = bool(raw["provider"].get("private_cluster"))
    assert head.inputs["networkInterfaces"][0]["accessConfigs"] == ([] if private else [{}]), \
        "a head has an external IP unless the cluster is private"
    assert f"ray-{cluster}-head" in head.inputs["tags"]
    metadata = head.inputs["metadata"]
    login_key = "ray-authorized-key" if raw["provider"].get("os_login") else "ssh-keys"
    assert {"startup-script", login_key, "ray-bootstrap-config"} <= set(metadata)
    # The key itself stays in Secret Manager; metadata only names the version to read.
    assert metadata["ray-bootstrap-ssh-key-secret"] == (
        f"projects/{project}/secrets/ray-{cluster}-ssh-key/versions/1")
    assert "ray-bootstrap-ssh-key" not in metadata
    bootstrap = yaml.safe_load(head_config_text(run, head))
    assert bootstrap["provider"]["project_id"] == project
    assert bootstrap["auth"]["ssh_private_key"] == "~/ray_bootstrap_key.pem"
    twins = bootstrap["provider"].get(PINNED_TYPES_FIELD, {})  # v2's view of pinned workers
    assert set(bootstrap["available_node_types"]) - set(twins) == set(
        raw.get("available_node_types") or {"ray_head_default": 0, "ray_worker_small": 0})


@pytest.mark.parametrize("stack", STACKS)
def test_each_worker_type_gets_min_workers_nodes(stack: str):
    run, raw = run_stack(stack), stack_yaml(stack)
    cluster, zone = raw["cluster_name"], raw["provider"]["availability_zone"]
    for name, spec in worker_types(raw).items():
        count = spec.get("min_workers", 0)
        node_config = spec["node_config"]
        if is_tpu(node_config):
            # One V2Vm a slice (tests/infra/test_program_tpu_slices.py checks their inputs).
            slices = [r for r in run.of_type(TPU_VM) if r.parent == f"{cluster}-{name}"]
            assert len(slices) == count
            continue
        group = run.named(f"{cluster}-{name}")
        assert group.type == WORKER_GROUP
        assert group.inputs["count"] == count
        body = group.inputs["body"]
        assert body["labels"]["ray-node-type"] == "unmanaged"
        assert body["labels"]["ray-node-status"] == "up-to-date"
        assert body["labels"]["ray-node-name"] == f"ray-{cluster}-worker"
        assert body["labels"]["ray-user-node-type"] == name
        assert body["machineType"] == f"zones/{zone}/machineTypes/{node_config['machineType']}"
        preemptible = any(s.get("preemptible") for s in node_config.get("scheduling", []))
        assert body["scheduling"].get("preemptible", False) is preemptible
        items = {i["key"]: i["value"] for i in body["metadata"]["items"]}
        assert items["ray-head-address"].startswith(f"ray-{cluster}-head-")
        assert "startup-script" in items
        assert "ray-bootstrap-ssh-key" not in items


def test_gpu_types_map_accelerators_scheduling_and_keep_user_metadata():
    run, raw = run_stack("gpu-docker"), stack_yaml("gpu-docker")
    zone, project = raw["provider"]["availability_zone"], raw["provider"]["project_id"]
    (head,) = run.of_type(INSTANCE)
    accelerator = raw["available_node_types"]["ray_head_gpu"]["node_config"]["guestAccelerators"][0]
    short = accelerator["acceleratorType"]
    assert head.inputs["guestAccelerators"] == [{
        "type": f"projects/{project}/zones/{zone}/acceleratorTypes/{short}",
        "count": accelerator["acceleratorCount"]}]
    assert head.inputs["scheduling"]["onHostMaintenance"] == "TERMINATE"
    worker = run.named("gpu-docker-ray_worker_gpu").inputs["body"]
    assert worker["scheduling"] == {"preemptible": True, "onHostMaintenance": "TERMINATE"}
    items = {i["key"]: i["value"] for i in worker["metadata"]["items"]}
    assert items["install-nvidia-driver"] == "True"
    assert items["ssh-keys"].startswith("ubuntu:ssh-ed25519 ")
    assert items["ssh-keys"].endswith(" ubuntu")


@pytest.mark.parametrize("stack", ["full", "tpu"])
def test_head_key_lives_in_secret_manager_readable_by_the_autoscaler_only(stack: str):
    run, raw = run_stack(stack), stack_yaml(stack)
    project, cluster = raw["provider"]["project_id"], raw["cluster_name"]
    # Ray's auth token has a secret of its own (tests/infra/test_program_ray_token.py).
    (secret,) = [r for r in run.of_type("gcp:secretmanager/secret:Secret")
                 if r.inputs["secretId"] == f"ray-{cluster}-ssh-key"]
    (version,) = [r for r in run.of_type("gcp:secretmanager/secretVersion:SecretVersion")
                  if r.name == f"{secret.name}-version"]
    assert version.inputs["secretData"] == "[secret]"
    (accessor,) = [r for r in run.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")
                   if r.name == f"{secret.name}-accessor"]
    assert accessor.inputs["role"] == "roles/secretmanager.secretAccessor"
    assert accessor.inputs["member"] == (
        f"serviceAccount:ray-autoscaler-sa-v1@{project}.iam.gserviceaccount.com")


def test_firewall_opens_ray_ports_inside_the_cluster_and_ssh_to_the_head():
    run = run_stack("full")
    rules = {r.name: r.inputs for r in run.of_type("gcp:compute/firewall:Firewall")}
    internal, ssh = rules["ray-full-internal"], rules["ray-full-ssh"]
    assert internal["sourceTags"] == internal["targetTags"] == ["ray-full"]
    assert "sourceRanges" not in internal
    assert {"protocol": "tcp", "ports": ["0-65535"]} in internal["allows"]
    assert ssh["targetTags"] == ["ray-full-head"]
    assert ssh["allows"] == [{"protocol": "tcp", "ports": ["22"]}]


def test_stack_outputs_give_what_attach_needs_and_hide_the_key():
    outputs = run_stack("full").outputs
    assert outputs["ssh_private_key"] == "[secret]"
    assert outputs["ssh_user"] == "ubuntu"
    assert outputs["head_name"].startswith("ray-full-head-")
    assert outputs["head_internal_ip"] and outputs["head_external_ip"]
    assert outputs["service_account_email"].startswith("ray-autoscaler-sa-v1@")
    assert set(outputs["node_names"]) == {"ray_head_default", "ray_worker_small"}
    assert outputs["node_names"]["ray_head_default"] == [outputs["head_name"]]
    assert [n["kind"] for n in outputs["nodes"]].count("head") == 1
