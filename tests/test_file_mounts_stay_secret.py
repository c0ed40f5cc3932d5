"""A stack that mounts a private key and credential files leaks them nowhere: not in the plan
JSON, the recorded state or exports, nor in `invoke diff`'s Markdown, raw or base64.

By default key-like files are held back from metadata (they go over SSH); asked to inline
them (`provider.inline_secret_file_mounts: true`), every file_mounts value is a Pulumi secret.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import pytest
import yaml

from bootstrap import plan_file_mounts
from infra.config import parse_cluster_config
from infra.ssh_keys import generate_key_pair
from infra.stack_config import PROJECT_ROOT
from ops.review.plan import plan_stack, render_json
from ops.review.plan_diff import diff_plans, unchanged_count
from ops.review.plan_markdown import render_markdown

FULL = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
SA_KEY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCsecretsecret"
WORKER = "full-ray_worker_small"
INSTANCE = "gcp:compute/instance:Instance"


def secret_files(directory: Path, password: str = "hunter2-secret") -> dict[str, Path]:
    """A private key, a service-account JSON and a short `.netrc` (its base64 is short
    enough that a diff would once print it whole)."""
    directory.mkdir(parents=True, exist_ok=True)
    contents = {
        "id_rsa": generate_key_pair()[0],
        "sa.json": json.dumps({"type": "service_account", "client_email": "x@p.iam.gserviceaccount"
                               ".com", "private_key": f"-----BEGIN PRIVATE KEY-----\n{SA_KEY}\n"
                               "-----END PRIVATE KEY-----\n"}),
        ".netrc": f"machine h login u password {password}\n",
    }
    for name, text in contents.items():
        (directory / name).write_text(text)
    return {name: directory / name for name in contents}


def fragments(paths: dict[str, Path]) -> list[str]:
    """Pieces of each file that must appear nowhere: its base64 and its secret lines."""
    found = []
    for path in paths.values():
        content = path.read_bytes()
        encoded = base64.b64encode(content).decode()
        found += [encoded, encoded[4:36]]
        found += [line for line in content.decode().splitlines()
                  if len(line) >= 12 and "-----" not in line][:3]
    return found + [SA_KEY, "hunter2-secret"]


def cluster_mounting(files: dict[str, Path], inline: bool) -> dict:
    cluster = copy.deepcopy(FULL)
    cluster["provider"]["inline_secret_file_mounts"] = inline
    cluster["file_mounts"] = {f"~/secrets/{name}": str(path) for name, path in files.items()}
    return cluster


def plan_of(root: Path, stack: str, cluster: dict) -> dict:
    (root / "stacks/clusters").mkdir(parents=True, exist_ok=True)
    (root / f"stacks/clusters/{stack}.yaml").write_text(yaml.safe_dump(cluster))
    (root / f"stacks/Pulumi.{stack}.yaml").write_text(
        yaml.safe_dump({"config": {"ray-gcp:cluster": f"stacks/clusters/{stack}.yaml"}}))
    return plan_stack(stack, root)


def resource(plan: dict, type_token: str, name: str | None = None) -> dict:
    return next(r for r in plan["resources"]
                if r["type"] == type_token and (name is None or r["name"] == name))


def assert_no_material(text: str, paths: dict[str, Path]) -> None:
    leaked = [piece for piece in fragments(paths) if piece in text]
    assert leaked == []


def test_key_like_files_are_held_back_from_metadata_unless_asked(tmp_path):
    files = secret_files(tmp_path / "secrets")
    (tmp_path / "notes.txt").write_text("just notes\n")
    mounts = {**{f"~/{n}": str(p) for n, p in files.items()}, "~/notes.txt": str(tmp_path /
                                                                                  "notes.txt")}
    data = {**copy.deepcopy(FULL), "file_mounts": mounts}
    held = plan_file_mounts(parse_cluster_config(data))
    assert sorted(held.held_back) == sorted(f"~/{name}" for name in files)
    assert sorted(held.over_ssh) == sorted(f"~/{name}" for name in files)
    assert [m.target for m in held.in_metadata] == ["~/notes.txt"]
    data["provider"] = {**data["provider"], "inline_secret_file_mounts": True}
    inlined = plan_file_mounts(parse_cluster_config(data))
    assert inlined.held_back == [] and inlined.over_ssh == {} and len(inlined.in_metadata) == 4


@pytest.mark.parametrize("inline", [False, True])
def test_plan_and_state_show_no_key_material(tmp_path, inline, caplog):
    files = secret_files(tmp_path / "secrets")
    plan = plan_of(tmp_path / "root", "sec", cluster_mounting(files, inline))
    warned = [r.getMessage() for r in caplog.records if "looks like a key" in r.getMessage()]
    assert len(warned) == (0 if inline else 3)
    assert inline or "file_mounts ~/secrets/id_rsa: looks like a key" in " ".join(warned)
    assert_no_material(render_json(plan), files)
    head = resource(plan, INSTANCE)
    mounts = {k: v for k, v in head["inputs"]["metadata"].items()
              if k.startswith("ray-file-mount-")}
    assert list(mounts.values()) == (["[secret]"] * 3 if inline else [])
    assert isinstance(head["inputs"]["networkInterfaces"], list)  # only the secrets are masked
    body = resource(plan, "pulumi-python:dynamic/ray-gcp:WorkerGroup", WORKER)["inputs"]["body"]
    assert (body == "[secret]") is inline  # the worker's metadata carries the content


def test_diff_never_prints_file_mount_content_even_from_an_older_unmasked_plan(
    tmp_path, monkeypatch
):
    before = secret_files(tmp_path / "before")
    after = secret_files(tmp_path / "after", password="rotated-secret")
    # The base as code before this change planned it: content in plain metadata values.
    with monkeypatch.context() as old_code:
        old_code.setattr("infra.metadata.is_file_mount_key", lambda key: False)
        base = plan_of(tmp_path / "base", "sec", cluster_mounting(before, inline=True))
    assert base64.b64encode(before[".netrc"].read_bytes()).decode() in render_json(base)
    head = plan_of(tmp_path / "head", "sec", cluster_mounting(after, inline=True))
    rows = diff_plans(base, head)
    markdown = render_markdown(rows, "sec", "`main`", "working tree",
                               unchanged_count(base, head))
    assert "ray-file-mount-" in markdown  # the change is listed ...
    assert_no_material(markdown, before)  # ... its values are not
    assert_no_material(markdown, after)
    assert "rotated-secret" not in markdown


def test_diff_of_an_unmasked_autoscaler_config_hides_file_mount_values():
    def plan(value: str) -> dict:
        config = {"available_node_types": {"w": {"node_config": {"metadata": {"items": [
            {"key": "ray-file-mount-0", "value": value},
            {"key": "startup-script", "value": "#!/bin/sh"}]}}}}}
        head = {"type": INSTANCE, "kind": "Instance", "name": "head", "parent": "full",
                "custom": True, "inputs": {"metadata": {
                    "ray-bootstrap-config": yaml.safe_dump(config) + "#" * 80,
                    "ray-file-mount-0": value}}}
        return {"resources": [head]}

    rows = diff_plans(plan("c2VjcmV0LW9uZQ=="), plan("c2VjcmV0LXR3bw=="))
    markdown = render_markdown(rows, "s", "`main`", "working tree", 0)
    assert "available_node_types.w.node_config.metadata.ray-file-mount-0: [secret] -> " \
        "[secret]" in markdown
    assert "head.metadata.ray-file-mount-0" in markdown
    assert "c2VjcmV0" not in markdown
