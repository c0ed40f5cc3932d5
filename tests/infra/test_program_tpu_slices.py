"""TPU worker types under Pulumi's mocks: each slice Pulumi keeps is a `gcp:tpu/v2Vm:V2Vm` whose
inputs come from the unchanged Ray cluster YAML, and a count change adds or removes exactly the
highest-index slices."""

from __future__ import annotations

import copy

import pytest
import yaml
from ray.autoscaler._private.util import hash_launch_conf

from model.config import parse_cluster_config
from model.config.cluster import ray_up_autoscaler_version
from model.plan import plan_cluster
from tests.support.program_runs import (
    head_config_text,
    run_inline,
    run_stack,
    stack_label,
    stack_yaml,
)

TPU_STACKS = ["tpu", "tpu-pod", "tpu-pod-topology"]
V2VM = "gcp:tpu/v2Vm:V2Vm"
ACCELERATOR_KEYS = ("acceleratorType", "acceleratorConfig")


def tpu_worker_types(raw: dict) -> dict[str, dict]:
    head = raw["head_node_type"]
    return {name: spec for name, spec in raw["available_node_types"].items()
            if name != head and "runtimeVersion" in spec["node_config"]}


def slices_of(run, cluster: str, node_type: str) -> list:
    """The V2Vm children of the type's TpuSlices component, by index."""
    parent = f"{cluster}-{node_type}"
    found = [r for r in run.of_type(V2VM) if r.parent == parent]
    return sorted(found, key=lambda r: int(r.name.rsplit("-", 1)[1]))


def head_bootstrap(run) -> dict:
    (head,) = run.of_type("gcp:compute/instance:Instance")
    return yaml.safe_load(head_config_text(run, head))


@pytest.mark.parametrize("stack", TPU_STACKS)
def test_each_kept_tpu_slice_is_a_v2vm_with_the_yamls_inputs(stack: str):
    run, raw = run_stack(stack), stack_yaml(stack)
    provider, cluster = raw["provider"], raw["cluster_name"]
    project, region = provider["project_id"], provider["region"]
    plan = plan_cluster(parse_cluster_config(copy.deepcopy(raw), "test"))
    for node_type, spec in tpu_worker_types(raw).items():
        node_config = spec["node_config"]
        slices = slices_of(run, cluster, node_type)
        assert len(slices) == spec.get("min_workers", 0) > 0
        assert not [r for r in run.resources if r.name == f"{cluster}-{node_type}"
                    and r.type == "pulumi-python:dynamic/ray-gcp:WorkerGroup"], "no TPU WorkerGroup"
        names = [s.inputs["name"] for s in slices]
        assert len(set(names)) == len(names)
        (group,) = [g for g in plan.workers if g.node_type == node_type]
        for vm in slices:
            inputs = vm.inputs
            assert inputs["project"] == project and inputs["zone"] == provider["availability_zone"]
            assert inputs["runtimeVersion"] == node_config["runtimeVersion"]
            for key in ACCELERATOR_KEYS:
                assert inputs.get(key) == node_config.get(key)
            assert inputs["networkConfig"] == {
                "network": f"projects/{project}/global/networks/default",
                "subnetwork": f"projects/{project}/regions/{region}/subnetworks/default",
                "enableExternalIps": True,
            }
            assert inputs["name"].startswith(f"ray-{cluster}-worker-")
            assert inputs["name"].endswith("-tpu") and len(inputs["name"]) <= 63
            assert inputs["tags"] == [f"ray-{cluster}"]
            # The plan's labels (Ray's, for a node Pulumi owns) plus the launch hash.
            labels = dict(inputs["labels"])
            assert labels.pop("ray-launch-config")
            assert labels.pop("ray-gcp-stack") == stack_label(run)
            assert labels == group.labels
            assert "schedulingConfig" not in inputs
            # Each TPU host runs as the cluster's worker account: it reads the Ray token.
            assert inputs["serviceAccount"] == {
                "email": f"ray-{cluster}-worker@{project}.iam.gserviceaccount.com",
                "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}


@pytest.mark.parametrize("stack", TPU_STACKS)
def test_slices_carry_the_body_rays_autoscaler_launches_with_the_same_launch_hash(
    stack: str, tmp_path
):
    """Metadata (startup script, keys, head address) is what the head's autoscaler config
    holds for the type, plus the mark of a node Pulumi keeps (`ray-node-kind: unmanaged`, so
    it reports no instance to autoscaler v2), and the launch hash is what Ray's own function
    computes from the autoscaler's copy."""
    run, raw = run_stack(stack), stack_yaml(stack)
    bootstrap = head_bootstrap(run)
    key_file = tmp_path / "ray_bootstrap_key.pem"
    key_file.write_text("planned-private-key")  # what the offline engine's key pair returns
    auth = {**bootstrap["auth"], "ssh_private_key": str(key_file)}
    for node_type in tpu_worker_types(raw):
        node_config = bootstrap["available_node_types"][node_type]["node_config"]
        for vm in slices_of(run, raw["cluster_name"], node_type):
            assert vm.inputs["metadata"] == {**node_config["metadata"],
                                             "ray-node-kind": "unmanaged"}
            assert "startup-script" in vm.inputs["metadata"]
            assert vm.inputs["metadata"]["ray-head-address"] == run.outputs["head_name"]
            assert vm.inputs["labels"]["ray-launch-config"] == hash_launch_conf(node_config, auth)


@pytest.mark.parametrize("stack", TPU_STACKS)
def test_tpu_types_stay_in_the_heads_autoscaler_config_and_tpu_admin_is_bound(stack: str):
    run, raw = run_stack(stack), stack_yaml(stack)
    bootstrap = head_bootstrap(run)
    for node_type, spec in tpu_worker_types(raw).items():
        listed = bootstrap["available_node_types"][node_type]
        for key in ("runtimeVersion", *ACCELERATOR_KEYS):
            assert listed["node_config"].get(key) == spec["node_config"].get(key)
        # Under autoscaler v2 (Ray's default here) the slices Pulumi keeps leave less room.
        kept = len(slices_of(run, raw["cluster_name"], node_type))
        room = kept if ray_up_autoscaler_version() == "v2" else 0
        assert listed["max_workers"] == spec.get("max_workers", raw["max_workers"]) - room
    roles = {m.inputs["role"] for m in run.of_type("gcp:projects/iAMMember:IAMMember")}
    assert "roles/tpu.admin" in roles


def test_slice_outputs_name_every_slice_for_invoke():
    run, raw = run_stack("tpu"), stack_yaml("tpu")
    names = [s.inputs["name"] for s in slices_of(run, raw["cluster_name"], "ray_tpu")]
    assert run.outputs["node_names"]["ray_tpu"] == names
    workers = [n for n in run.outputs["nodes"] if n["node_type"] == "ray_tpu"]
    assert [n["name"] for n in workers] == names
    assert all(n["internal_ip"] and n["status"] == "READY" for n in workers)


def scaled(counts: dict[str, int]) -> object:
    raw = stack_yaml("tpu")
    raw["available_node_types"]["ray_tpu"]["min_workers"] = 1
    return run_inline(raw, workerCounts=counts)


def test_a_count_change_adds_or_removes_exactly_the_highest_index_slices():
    three, five = scaled({"ray_tpu": 3}), scaled({"ray_tpu": 5})
    before = {vm.name: vm.inputs for vm in slices_of(three, "tputest", "ray_tpu")}
    after = {vm.name: vm.inputs for vm in slices_of(five, "tputest", "ray_tpu")}
    assert set(after) - set(before) == {"tputest-ray_tpu-3", "tputest-ray_tpu-4"}
    assert set(before) <= set(after)
    for name, inputs in before.items():
        assert after[name] == inputs, f"{name} must be left untouched"


def test_spot_account_disks_and_explicit_network_reach_the_v2vm():
    raw = stack_yaml("tpu-pod")
    project, region = raw["provider"]["project_id"], raw["provider"]["region"]
    node_config = raw["available_node_types"]["ray_tpu"]["node_config"]
    node_config.update({
        "schedulingConfig": {"spot": True},
        "serviceAccount": {"email": f"tpu@{project}.iam.gserviceaccount.com",
                           "scope": ["https://www.googleapis.com/auth/cloud-platform"]},
        "dataDisks": [{"sourceDisk": f"projects/{project}/zones/us-central2-b/disks/data",
                       "mode": "READ_ONLY"}],
        "networkConfig": {"network": "ray-net", "subnetwork": "ray-sub",
                          "enableExternalIps": False},
        "labels": {"team": "ml"},
        "metadata": {"user-key": "kept"},
    })
    run = run_inline(raw)
    (vm,) = slices_of(run, raw["cluster_name"], "ray_tpu")
    inputs = vm.inputs
    assert inputs["schedulingConfig"] == node_config["schedulingConfig"]
    assert inputs["serviceAccount"] == {"email": node_config["serviceAccount"]["email"],
                                        "scopes": node_config["serviceAccount"]["scope"]}
    assert inputs["dataDisks"] == node_config["dataDisks"]
    assert inputs["networkConfig"] == {
        "network": f"projects/{project}/global/networks/ray-net",
        "subnetwork": f"projects/{project}/regions/{region}/subnetworks/ray-sub",
        "enableExternalIps": False,
    }
    assert inputs["labels"]["team"] == "ml"
    assert inputs["metadata"]["user-key"] == "kept"
