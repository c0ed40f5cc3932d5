"""A stack with file_mounts deployed before the archive's name was keyed keeps working.

Its state (tests/engine_state/mounts.json: tests/engine_state/mounts.yaml upped by main at
1f08e54, whose archive was named by the bare sha256 of the packed files) is imported into a
fresh stack and previewed by today's program. The stack's key is to be created, and until it
exists the new names are unknown: the preview shows the key added, the two bucket objects (the
archive, and the autoscaler config whose worker bodies name it) replaced, and the worker group
replaced too, its body being unknown (an unknown body may hold a new machine). The `up` then
updates the group in place (the engine asks its provider again with the body known; measured
on the fake cloud, where the `up` needs the live resources the state names, which an imported
state lacks). No instance is replaced and nothing is removed.

The state was made with `python -m tests.test_engine_mounts_key_upgrade` run in a checkout of
that commit (with this file copied in): it ups the stack on the fake cloud and writes the
state and its encryption salt.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import (
    ENGINE_STATE,
    EngineWorkspace,
    freeze_state,
    urn_type,
)

STATE = ENGINE_STATE / "mounts.json"
SALT = ENGINE_STATE / "mounts.encryptionsalt"
CLUSTER = {"ray-gcp:cluster": "tests/engine_state/mounts.yaml"}
INSTANCE = "gcp:compute/instance:Instance"
BUCKET_OBJECT = "gcp:storage/bucketObject:BucketObject"
STACK_SECRET = "pulumi-python:dynamic/ray-gcp:StackSecret"
WORKER_GROUP = "pulumi-python:dynamic/ray-gcp:WorkerGroup"
RAY_TOKEN = "ray-mounts-auth-token"
LEAST_PRIVILEGE_ADDS = ("ray-mounts-worker", "ray-mounts-bucket-reader-")
PROJECT_ROLE = "gcp:projects/iAMMember:IAMMember"
DROPPED_ROLES = (["storage", "objectAdmin"], ["iam", "serviceAccountUser"], ["iam", "roleViewer"])


def _by_type(operations: dict[str, str]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for urn, op in operations.items():
        found.setdefault(op, set()).add(urn_type(urn))
    return found


def test_a_stack_with_mounts_from_before_the_key_previews_its_objects_replaced_only(
    engine_bin: Path, tmp_path: Path,
) -> None:
    bin_dir = engine_bin
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir, root=tmp_path)
        (space.project / "Pulumi.mounts.yaml").write_text(yaml.safe_dump(
            {"encryptionsalt": SALT.read_text().strip(), "config": CLUSTER}))
        (space.root / "import.json").write_text(STATE.read_text())
        space.run("mounts", "import")
        preview = space.run("mounts", "preview").operations()

    # Ray's token (its value, secret, version and reader) came after this state was made too,
    # under names no old resource had (tests/engine/test_engine_old_state.py judges those adds).
    # So did least privilege (judged there too): the cluster's worker account and its grants
    # are added, and the head's project-wide roles, retained on delete, leave the state.
    preview = {urn: op for urn, op in preview.items()
               if not urn.rsplit("::", 1)[-1].startswith((RAY_TOKEN, *LEAST_PRIVILEGE_ADDS))
               and not (op == "remove" and urn_type(urn) == PROJECT_ROLE
                        and urn.rsplit("-", 2)[-2:] in DROPPED_ROLES)}
    stored = {r["urn"] for r in json.loads(STATE.read_text())["resources"]}
    assert {urn for urn in preview if urn not in stored} == {
        urn for urn in preview if urn_type(urn) == STACK_SECRET}
    found = _by_type(preview)
    assert found.get("add") == {STACK_SECRET}
    assert found.get("replace") == {BUCKET_OBJECT, WORKER_GROUP}
    assert "remove" not in found
    assert INSTANCE in found.get("update", set())
    replaced_objects = [urn for urn, op in preview.items()
                        if op == "replace" and urn_type(urn) == BUCKET_OBJECT]
    assert sorted(urn.rsplit("::", 1)[1] for urn in replaced_objects) == [
        "ray-mounts-bucket-autoscaler-config", "ray-mounts-bucket-file-mounts"]


if __name__ == "__main__":
    freeze_state("mounts", CLUSTER)
    sys.exit(0)
