"""The program gives every node Ray's auth token by reference only: a token generated once per
stack (its own dynamic type, a secret output), kept in a Secret Manager secret the nodes'
service accounts may read, named in the metadata of the head, the pinned workers, the TPU
slices and every worker body the autoscaler launches from. The plan shows the token only as a
secret. `provider.ray_token_auth: false` removes it all, and the plan and the PR diff warn."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from bootstrap.head_provider import pinned
from infra.dynamic_types import STACK_SECRET_TYPE, WORKER_GROUP_TYPE
from ops.review.plan import plan_stack, render_table
from ops.review.plan_base import diff_stack_markdown
from ops.review.plan_engine import plan_secret
from tests.support.plan_repos import BASE_YAML, git_commit_all, write_stack
from tests.support.program_runs import head_config_text, run_stack, stack_yaml

TOKEN_KEY = "ray-auth-token-secret"
SECRET = "gcp:secretmanager/secret:Secret"
VERSION = "gcp:secretmanager/secretVersion:SecretVersion"
ACCESSOR = "gcp:secretmanager/secretIamMember:SecretIamMember"
INSTANCE, TPU_VM = "gcp:compute/instance:Instance", "gcp:tpu/v2Vm:V2Vm"


def _items(metadata: dict | list) -> dict[str, str]:
    """Node metadata as key -> value, from the API's `{items: [...]}` or pulumi's mapping."""
    if isinstance(metadata, dict) and "items" in metadata:
        return {item["key"]: item["value"] for item in metadata["items"]}
    return dict(metadata)


def _every_node_metadata(run) -> dict[str, dict[str, str]]:
    """What each node we start, and each the autoscaler starts, reads: by where it comes from."""
    found = {}
    nodes = [*run.of_type(INSTANCE), *run.of_type(TPU_VM)]
    for node in nodes:
        found[f"{node.type} {node.name}"] = _items(node.inputs["metadata"])
    for group in run.of_type(WORKER_GROUP_TYPE):
        found[f"group {group.name}"] = _items(group.inputs["body"]["metadata"])
    (head,) = [n for n in nodes if n.inputs["labels"]["ray-node-type"] == "head"]
    bootstrap = yaml.safe_load(head_config_text(run, head))
    for name, node_type in bootstrap["available_node_types"].items():
        if name.endswith(pinned.SUFFIX):
            continue  # a pinned worker's v2 twin: counted, never launched (no body to read)
        found[f"autoscaler {name}"] = _items(node_type["node_config"]["metadata"])
    return found


@pytest.mark.parametrize("stack", ["full", "tpu-pod", "gpu-docker"])
def test_every_node_names_the_token_secret_version_readable_by_the_cluster_account(stack):
    run, raw = run_stack(stack), stack_yaml(stack)
    cluster, project = raw["cluster_name"], raw["provider"]["project_id"]
    (generated,) = [r for r in run.of_type(STACK_SECRET_TYPE)
                    if r.name == f"ray-{cluster}-auth-token-value"]
    (secret,) = [r for r in run.of_type(SECRET)
                 if r.inputs["secretId"] == f"ray-{cluster}-auth-token"]
    (version,) = [r for r in run.of_type(VERSION) if r.name == f"{secret.name}-version"]
    assert version.inputs["secretData"] == "[secret]"
    assert generated.parent == version.parent
    # Created once Secret Manager's API is on and the sweeper has claimed the cluster.
    for first in (secret, generated):
        assert any(urn.endswith("$gcp:projects/service:Service::" + f"ray-{cluster}-ssh-key-api")
                   for urn in first.dependencies), first.dependencies
        assert any(urn.endswith(f"::{cluster}.sweeper") for urn in first.dependencies)
    accessors = [r for r in run.of_type(ACCESSOR) if r.name.startswith(f"{secret.name}-")]
    assert {a.inputs["role"] for a in accessors} == {"roles/secretmanager.secretAccessor"}
    assert f"serviceAccount:ray-autoscaler-sa-v1@{project}.iam.gserviceaccount.com" in {
        a.inputs["member"] for a in accessors}
    # The latest version, by a name known at plan time (a preview keeps the bodies known).
    expected = f"projects/{project}/secrets/ray-{cluster}-auth-token/versions/latest"
    # ... so every node we create waits for the version to exist.
    for node in [*run.of_type(INSTANCE), *run.of_type(TPU_VM), *run.of_type(WORKER_GROUP_TYPE)]:
        assert version.urn in node.dependencies, node.name
    nodes = _every_node_metadata(run)
    assert any(where.startswith("autoscaler") for where in nodes)
    assert {where: entries.get(TOKEN_KEY) for where, entries in nodes.items()} == dict.fromkeys(
        nodes, expected)


def test_the_token_is_a_secret_output_and_never_in_clear_in_the_plan():
    run = run_stack("full")
    assert run.outputs["ray_auth_token"] == "[secret]"
    planned_token = plan_secret("full")  # what a plan's stack secrets hold
    recorded = json.dumps([r.inputs for r in run.resources]) + json.dumps(run.outputs)
    assert planned_token not in recorded
    plan = plan_stack("full")
    assert planned_token not in json.dumps(plan) + render_table(plan)
    assert not any("ray_token_auth" in warning for warning in plan["warnings"])


def _without_token_auth() -> dict:
    cluster = copy.deepcopy(BASE_YAML)
    cluster["provider"]["ray_token_auth"] = False
    return cluster


def test_turned_off_no_token_exists_and_no_node_names_one(tmp_path):
    write_stack(tmp_path, "s", _without_token_auth())
    plan = plan_stack("s", tmp_path)
    assert not [r for r in plan["resources"] if r["name"].endswith("-auth-token-value")]
    assert [r["inputs"]["secretId"] for r in plan["resources"] if r["type"] == SECRET] == [
        f"ray-{BASE_YAML['cluster_name']}-ssh-key"]
    assert TOKEN_KEY not in json.dumps(plan)
    (warning,) = [w for w in plan["warnings"] if w.startswith("provider.ray_token_auth")]
    assert "token authentication is off" in warning
    assert f"warning: {warning}\n" in render_table(plan)


@pytest.mark.slow  # the diff's plan interpreters: over 5 CPU-s (tests/conftest.py)
def test_turned_off_the_pr_diff_warns_even_without_a_resource_change(tmp_path):
    write_stack(tmp_path, "s", _without_token_auth())
    git_commit_all(tmp_path, "base")
    markdown = diff_stack_markdown("s", "HEAD", root=tmp_path)
    assert "No resource changes." in markdown
    warnings = [line for line in markdown.splitlines() if line.startswith("> **Warning:**")]
    assert any("provider.ray_token_auth: false" in line for line in warnings)
