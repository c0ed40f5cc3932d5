"""A stack deployed by the previous release still previews with no replacement: its state
(tests/engine_state/full.json, the `full` stack as release 0.1.0's program left it, with the
pickled dynamic providers and the resource names of then) is imported into a fresh stack and
previewed by today's program. Renamed resources must carry aliases; pickles must load.
What the state holds may only update in place; what today's program adds (the cluster's
bucket since 0.2) is a create of a kind the old state did not have, never a stand-in for an
old resource under a new name (that would be an add of a known kind beside a delete); Ray's
auth token's secret is the one add of known kinds, under names no old resource had.

The state was made with `python -m tests.test_engine_old_state` on that release (it ups
`full` against the fake cloud and writes the state and its encryption salt).
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

STATE = ENGINE_STATE / "full.json"
SALT = ENGINE_STATE / "full.encryptionsalt"
CLUSTER = {"ray-gcp:cluster": "stacks/clusters/full.yaml"}


def test_previous_release_state_previews_without_replacement(engine_bin: Path,
                                                             tmp_path: Path) -> None:
    bin_dir = engine_bin
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        # the frozen state's secrets are under the passphrase its salt goes with
        space = EngineWorkspace(fake, bin_dir, root=tmp_path, secrets_provider=None)
        (space.project / "Pulumi.full.yaml").write_text(yaml.safe_dump(
            {"encryptionsalt": SALT.read_text().strip(), "config": CLUSTER}))
        (space.root / "import.json").write_text(STATE.read_text())
        space.run("full", "import")
        preview = space.run("full", "preview")
    stored = json.loads(STATE.read_text())["resources"]
    kept = {r["urn"] for r in stored}
    assert any(r.get("custom") and "::pulumi:providers:" not in r["urn"] for r in stored), \
        "the stored state holds no resources"
    operations = preview.operations()
    refused = {urn: op for urn, op in operations.items()
               if (op in ("remove", "replace") and not _expected_since_release(urn, op))
               or (op == "add" and urn in kept)}
    assert refused == {}, refused
    added = {urn_type(urn) for urn, op in operations.items()
             if op == "add" and not _name_of(urn).startswith(NEW_SINCE_RELEASE)}
    assert not added & {r["type"] for r in stored}, added


# Resources today's program adds under names no old resource had, of kinds the old state
# holds: Ray's auth token, its secret, version and readers (the SSH key has a secret too).
# The cluster's own worker account, its grants, and each node account's bucket read.
NEW_SINCE_RELEASE = ("ray-full-auth-token", "ray-full-worker", "ray-full-bucket-reader-")
# Least privilege (model/identities.py) changes two things on purpose. The head account's
# project-wide storage.objectAdmin, serviceAccountUser and roleViewer leave the program: they
# were retained on delete (shared by the project's clusters), so dropping them from the state
# touches no policy. The pinned workers move to the cluster's worker account: GCE changes an
# instance's account only when it is stopped, so the group is replaced.
DROPPED_ROLES = ("storage-objectAdmin", "iam-serviceAccountUser", "iam-roleViewer")
MOVED_WORKERS = ("pulumi-python:dynamic/ray-gcp:WorkerGroup", "pulumi-python:dynamic:Resource")


def _expected_since_release(urn: str, op: str) -> bool:
    if op == "remove":
        return urn_type(urn) == "gcp:projects/iAMMember:IAMMember" and \
            _name_of(urn).removeprefix("ray-autoscaler-sa-v1-") in DROPPED_ROLES
    return urn_type(urn) in MOVED_WORKERS


def _name_of(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


if __name__ == "__main__":
    freeze_state("full", CLUSTER)
    sys.exit(0)
