"""Program behaviour beyond the shipped stacks: scaling input, Ray's launch hash, explicit
networks, user keys, credentials, and clean errors for bad stacks."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml
from ray.autoscaler._private.util import hash_launch_conf

from infra.dynamic_types import WORKER_GROUP_TYPE
from model.config import ConfigError
from tests.support.program_runs import PROJECT_ROOT, head_config_text, run_inline, stack_yaml


def test_worker_count_in_stack_config_scales_the_group():
    run = run_inline(stack_yaml("full"), workerCounts={"ray_worker_small": 2})
    assert run.named("full-ray_worker_small").inputs["count"] == 2


def test_worker_count_outside_the_type_range_names_the_key_and_the_range():
    with pytest.raises(ConfigError) as caught:
        run_inline(stack_yaml("full"), workerCounts={"ray_worker_small": 9})
    assert "ray-gcp:workerCounts.ray_worker_small" in str(caught.value)
    assert "max_workers 2" in str(caught.value)


def test_tpu_head_is_a_tpu_vm_with_its_accelerator_and_external_ip():
    raw = stack_yaml("tpu-pod-topology")
    head = raw["head_node_type"]
    raw["available_node_types"][head] = {
        "resources": {"TPU": 4},
        "node_config": raw["available_node_types"]["ray_tpu"]["node_config"]}
    run = run_inline(raw)
    assert not run.of_type("gcp:compute/instance:Instance")
    (tpu,) = [r for r in run.of_type("gcp:tpu/v2Vm:V2Vm") if r.parent == "tputopology-head"]
    node_config = raw["available_node_types"][head]["node_config"]
    assert tpu.inputs["acceleratorConfig"] == node_config["acceleratorConfig"]
    assert tpu.inputs["runtimeVersion"] == node_config["runtimeVersion"]
    assert tpu.inputs["networkConfig"]["enableExternalIps"] is True
    assert tpu.inputs["labels"]["ray-node-type"] == "head"
    assert tpu.inputs["name"].endswith("-tpu")
    assert run.outputs["head_external_ip"]


@pytest.mark.parametrize("stack", ["full", "gpu-docker", "tpu-pod"])
def test_worker_launch_hash_matches_what_rays_autoscaler_computes(stack, tmp_path):
    """The head's autoscaler terminates workers whose `ray-launch-config` differs from its own
    hash of the bootstrap config: hash the config the head receives with Ray's own function."""
    run = run_inline(stack_yaml(stack))
    (head,) = run.of_type("gcp:compute/instance:Instance")
    bootstrap = yaml.safe_load(head_config_text(run, head))
    key_file = tmp_path / "ray_bootstrap_key.pem"
    key_file.write_text("planned-private-key")  # what the offline engine's key pair returns
    auth = {**bootstrap["auth"], "ssh_private_key": str(key_file)}
    groups = run.of_type("pulumi-python:dynamic/ray-gcp:WorkerGroup")
    workers = [r.inputs["body"]["labels"] for r in groups]
    workers += [r.inputs["labels"] for r in run.of_type("gcp:tpu/v2Vm:V2Vm")]
    assert workers
    for labels in workers:
        node_config = bootstrap["available_node_types"][labels["ray-user-node-type"]]["node_config"]
        assert labels["ray-launch-config"] == hash_launch_conf(node_config, auth)


def test_explicit_network_interfaces_are_used_as_given():
    raw = stack_yaml("full")
    nic = {"network": "projects/p/global/networks/ray", "subnetwork":
           "projects/p/regions/us-west1/subnetworks/ray-sub", "accessConfigs": []}
    for node_type in raw["available_node_types"].values():
        node_type["node_config"]["networkInterfaces"] = [nic]
    run = run_inline(raw)
    (head,) = run.of_type("gcp:compute/instance:Instance")
    assert head.inputs["networkInterfaces"] == [{"network": nic["network"],
                                                 "subnetwork": nic["subnetwork"],
                                                 "accessConfigs": []}]
    body = run.named("full-ray_worker_small").inputs["body"]
    assert body["networkInterfaces"] == [nic]
    firewall = run.named("ray-full-internal").inputs
    assert firewall["network"] == nic["network"]


def test_users_own_key_is_used_and_never_recorded(tmp_path):
    from infra.ssh_keys import generate_key_pair

    private, public = generate_key_pair()
    key = tmp_path / "id_rsa"
    key.write_text(private)
    raw = stack_yaml("full")
    raw["auth"]["ssh_private_key"] = str(key)
    run = run_inline(raw)
    assert not [r for r in run.resources if r.name.endswith("ssh-key-pair")]
    items = {i["key"]: i["value"]
             for i in run.named("full-ray_worker_small").inputs["body"]["metadata"]["items"]}
    assert items["ssh-keys"] == f"ubuntu:{' '.join(public.split()[:2])} ubuntu"
    recorded = json.dumps([r.inputs for r in run.resources]) + json.dumps(run.outputs)
    assert private.splitlines()[1] not in recorded


def test_gcp_credentials_never_reach_recorded_inputs_or_outputs():
    secret_key = "-----BEGIN PRIVATE KEY-----\\nsupersecretmaterial\\n"
    raw = stack_yaml("full")
    raw["provider"]["gcp_credentials"] = {"type": "service_account", "credentials": json.dumps(
        {"client_email": "ci@p.iam.gserviceaccount.com", "private_key": secret_key})}
    run = run_inline(raw)
    recorded = json.dumps([r.inputs for r in run.resources]) + json.dumps(run.outputs)
    assert "supersecretmaterial" not in recorded
    assert run.named("full-ray_worker_small").inputs["credentials"] == "[secret]"


def test_bad_stack_ends_with_the_message_not_a_traceback(tmp_path, monkeypatch):
    """`pulumi up` runs infra/__main__.py; a RunError is printed by pulumi as its message."""
    bad = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
    bad["provider"]["project_id"] = None
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    # In a fresh interpreter: the mocks' runtime an errored program leaves behind would stall
    # the next program run in this process.
    script = (
        "import pulumi, runpy, sys\n"
        "from ops.review.plan_engine import ProgramRun, RecordingMocks\n"
        "pulumi.runtime.set_mocks(RecordingMocks(ProgramRun()), project='ray-gcp', stack='bad')\n"
        f"pulumi.runtime.set_all_config({{'ray-gcp:cluster': {str(path)!r}}}, [])\n"
        "try:\n"
        f"    runpy.run_path({str(PROJECT_ROOT / 'infra' / '__main__.py')!r})\n"
        "except pulumi.RunError as error:\n"
        "    print(error)\n"
        "    sys.exit(3)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    caught = SimpleNamespace(value=done.stdout)
    assert "provider.project_id" in str(caught.value)
    assert "set it to your GCP project id" in str(caught.value)


def test_head_autoscaler_config_is_the_same_whatever_the_stack_worker_count_under_v1():
    """Ray's autoscaler v1 counts Pulumi's (unmanaged) workers itself: scaling changes the
    worker group only, so the head never sees a new minimum before the group has made the
    nodes."""
    configs = []
    data = stack_yaml("full")
    data["provider"]["autoscaler_version"] = "v1"
    for count in (1, 2):
        run = run_inline(data, workerCounts={"ray_worker_small": count})
        (head,) = run.of_type("gcp:compute/instance:Instance")
        configs.append(head_config_text(run, head))
    assert configs[0] == configs[1]
    bootstrap = yaml.safe_load(configs[1])
    assert bootstrap["available_node_types"]["ray_worker_small"]["min_workers"] == 0


def test_pulumis_nodes_say_they_are_unmanaged_in_metadata_and_the_autoscalers_copy_not():
    """The node reads `ray-node-kind` (GCE serves it no labels) to decide whether it reports
    its instance to autoscaler v2: the groups' nodes and kept slices do, the head's copy of a
    worker body (what the autoscaler launches) does not."""
    for stack in ("full", "tpu"):
        run = run_inline(stack_yaml(stack))
        head = next(r for kind in ("gcp:compute/instance:Instance", "gcp:tpu/v2Vm:V2Vm")
                    for r in run.of_type(kind) if r.inputs["labels"]["ray-node-type"] == "head")
        bootstrap = yaml.safe_load(head_config_text(run, head))
        for name, node_type in bootstrap["available_node_types"].items():
            if name.endswith(".pinned"):  # v2's twin of a type: never launched, no body
                assert "metadata" not in node_type["node_config"]
                continue
            metadata = node_type["node_config"]["metadata"]
            keys = (metadata if isinstance(metadata, dict)
                    else {i["key"]: i["value"] for i in metadata["items"]})
            assert "ray-node-kind" not in keys
        groups = [r.inputs["body"] for r in run.of_type(WORKER_GROUP_TYPE)]
        slices = [r.inputs for r in run.of_type("gcp:tpu/v2Vm:V2Vm")
                  if r.inputs["labels"]["ray-node-type"] == "unmanaged"]
        assert groups or slices
        for body in groups:
            assert {"key": "ray-node-kind", "value": "unmanaged"} in body["metadata"]["items"]
        for vm in slices:
            assert vm["metadata"]["ray-node-kind"] == "unmanaged"


def test_sweeper_is_created_first_so_destroy_removes_it_last():
    """Pulumi destroys dependents first: the head and every worker group depend on the sweeper,
    so its delete runs after theirs and catches the autoscaler's nodes and leftovers."""
    run = run_inline(stack_yaml("tpu"))
    sweepers = run.of_type("pulumi-python:dynamic/ray-gcp:ClusterSweeper")
    assert [s.inputs["cluster_name"] for s in sweepers] == ["tputest"]
    assert sweepers[0].inputs["has_tpu"] is True
    sweeper_urn = run.urns[sweepers[0].name]
    dependents = [r.name for r in run.resources if sweeper_urn in r.dependencies]
    assert "tputest-head" in dependents
    slices = [r.name for r in run.of_type("gcp:tpu/v2Vm:V2Vm")]
    assert len(slices) == 7 and set(slices) <= set(dependents)


def test_head_metadata_over_gce_limits_is_refused_at_plan_time():
    """GCE caps one metadata value at 256 KB: the head's autoscaler config holds every
    command of the cluster, so a huge one is refused before anything is created."""
    raw = stack_yaml("full")
    raw["setup_commands"] = [f"echo {'x' * 1000} {index}" for index in range(300)]
    with pytest.raises(ConfigError) as caught:
        run_inline(raw)
    assert "256 KB" in str(caught.value)


def test_fifty_node_types_plan_and_the_autoscalers_workers_boot_themselves():
    """Every type's worker body (startup script included) is in the head's autoscaler config,
    which is an object in the cluster's bucket: past the 256 KB GCE takes for one metadata
    value (about 17 types), and the head's metadata only names it."""
    raw = stack_yaml("full")
    worker = raw["available_node_types"]["ray_worker_small"]
    raw["max_workers"] = 100
    for index in range(50):
        raw["available_node_types"][f"extra_{index}"] = {**worker, "min_workers": 0}
    run = run_inline(raw)
    (head,) = run.of_type("gcp:compute/instance:Instance")
    reference = head.inputs["metadata"]["ray-bootstrap-config"]
    assert reference.startswith("gs://ray-full-") and len(reference) < 200
    bootstrap_text = head_config_text(run, head)
    assert len(bootstrap_text) > 256 * 1024
    bootstrap = yaml.safe_load(bootstrap_text)
    types = bootstrap["available_node_types"]
    assert len([name for name in types if not name.endswith(".pinned")]) == 52
    assert bootstrap["provider"]["disable_node_updaters"] is True
    node_config = bootstrap["available_node_types"]["extra_7"]["node_config"]
    keys = {item["key"] for item in node_config["metadata"]["items"]}
    assert {"startup-script", "ssh-keys", "ray-head-address"} <= keys
