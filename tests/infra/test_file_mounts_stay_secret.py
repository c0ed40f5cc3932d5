"""A stack that mounts a private key and credential files leaks them nowhere: not in the plan
JSON, the recorded state or exports, nor in `invoke diff`'s Markdown, raw or base64.

They travel like every other mount, in the archive the program stores in the cluster's private
bucket: a plan names the archive by its content's hash, and no node's metadata carries a byte
of it. A plan made by older code (content in `ray-file-mount-<n>` metadata) is diffed without
printing it either.
"""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import hmac
import io
import json
import stat
import tarfile
from pathlib import Path

import pytest
import yaml

from bootstrap.file_mounts import pack_file_mounts
from infra.ssh_keys import generate_key_pair
from model.config import parse_cluster_config
from model.stack_config import PROJECT_ROOT
from ops.review.plan import plan_stack, render_json
from ops.review.plan_diff import diff_plans, unchanged_count
from ops.review.plan_engine import PLAN_SECRET_FILE
from ops.review.plan_markdown import render_markdown

FULL = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
SA_KEY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCsecretsecret"
INSTANCE = "gcp:compute/instance:Instance"
BUCKET_OBJECT = "gcp:storage/bucketObject:BucketObject"


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


def cluster_mounting(files: dict[str, Path]) -> dict:
    cluster = copy.deepcopy(FULL)
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


@pytest.fixture(autouse=True)
def _archives_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_key_files_travel_in_the_archive_and_the_plan_names_it_by_hash_only(tmp_path):
    files = secret_files(tmp_path / "secrets")
    plan = plan_of(tmp_path / "root", "sec", cluster_mounting(files))
    assert_no_material(render_json(plan), files)
    head = resource(plan, INSTANCE)
    assert not [key for key in head["inputs"]["metadata"] if key.startswith("ray-file-mount-")]
    assert isinstance(head["inputs"]["networkInterfaces"], list)
    archive = resource(plan, BUCKET_OBJECT, "ray-full-bucket-file-mounts")["inputs"]
    digest = archive["name"].removeprefix("file-mounts/")
    assert archive["source"] == f"[file {digest}]"
    assert not (tmp_path / "state").exists()  # a plan names the archive, it keeps nothing
    packed = pack_file_mounts(parse_cluster_config(cluster_mounting(files)))
    with tarfile.open(fileobj=io.BytesIO(packed.tar)) as tar:  # every file, keys included
        assert sorted(m.name for m in tar.getmembers()) == ["0", "1", "2"]
        assert tar.extractfile("1").read() == files["id_rsa"].read_bytes()


def test_diff_of_rotated_secret_mounts_names_the_archive_and_prints_no_content(tmp_path):
    before = secret_files(tmp_path / "before")
    after = secret_files(tmp_path / "after", password="rotated-secret")
    base = plan_of(tmp_path / "base", "sec", cluster_mounting(before))
    head = plan_of(tmp_path / "head", "sec", cluster_mounting(after))
    rows = diff_plans(base, head)
    markdown = render_markdown(rows, "sec", "`main`", "working tree",
                               unchanged_count(base, head))
    assert "ray-full-bucket-file-mounts" in markdown  # the change is listed ...
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


def _archive_name(plan: dict) -> str:
    return resource(plan, BUCKET_OBJECT, "ray-full-bucket-file-mounts")["inputs"]["name"]


def _pin_cluster(directory: Path, pin: str) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pin").write_text(pin)
    cluster = copy.deepcopy(FULL)
    cluster["file_mounts"] = {"~/secrets/pin": str(directory / "pin")}
    return cluster


def test_the_archive_name_is_keyed_per_stack_stable_and_follows_the_content(tmp_path):
    """The name (in the bucket object and every node's startup script) is an HMAC under the
    stack's own secret: two stacks with the same files name them differently, one stack names
    them alike plan after plan, and a changed file is a new name."""
    cluster = _pin_cluster(tmp_path / "pin", "4821")
    one = _archive_name(plan_of(tmp_path / "a", "one", cluster))
    again = _archive_name(plan_of(tmp_path / "b", "one", cluster))
    other = _archive_name(plan_of(tmp_path / "c", "two", cluster))
    changed = _archive_name(plan_of(tmp_path / "d", "one", _pin_cluster(tmp_path / "new", "4822")))
    assert one == again
    assert other != one
    assert changed != one
    assert one.startswith("file-mounts/") and one.endswith(".tar.gz")


def test_a_pin_file_cannot_be_checked_against_the_plan_without_the_stacks_key(tmp_path):
    """What the metadata once carried, the sha256 of the packed files, lets anyone test the
    10^4 PINs offline: no bare hash of the content is anywhere in the plan (metadata, bucket
    object, exports), and the stack's key, kept 0600 in this machine's cache, is not in it
    either."""
    cluster = _pin_cluster(tmp_path / "pin", "4821")
    plan = plan_of(tmp_path / "root", "sec", cluster)
    text = render_json(plan)
    config = parse_cluster_config(cluster)
    tar = pack_file_mounts(config).tar
    for plain in (hashlib.sha256(tar).hexdigest(), hashlib.sha256(b"4821").hexdigest(),
                  hashlib.sha256(gzip.compress(tar, mtime=0)).hexdigest()):
        assert plain not in text
        assert plain[:16] not in text
    head = resource(plan, INSTANCE)["inputs"]["metadata"]
    assert _archive_name(plan) in head["startup-script"]
    key_file = tmp_path / "cache" / "ray-gcp-pulumi" / "plans" / "sec" / PLAN_SECRET_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.read_text() not in text
    # The name is the HMAC under that key, so whoever holds it (and only they) can check it.
    expected = hmac.new(key_file.read_text().encode(), tar, hashlib.sha256).hexdigest()
    assert _archive_name(plan) == f"file-mounts/{expected}.tar.gz"
