"""A team's state in a Cloud Storage bucket (`PULUMI_BACKEND_URL=gs://BUCKET/PREFIX`), through the
real pulumi engine, whose `gs://` client reaches the fake Cloud Storage (tests/fakes/gcs.py) as
it reaches an emulator (STORAGE_EMULATOR_HOST), with the fake cloud and the stand-in gcp plugin:

- `invoke up -c` keeps the stack's state (and, while it runs, its lock) in the bucket, and
  `pulumi` itself reads the same stack there;
- a run killed half way leaves its lock in the bucket: the next run names it in one line,
  `invoke unlock` shows and clears it, and the run again converges;
- with object versioning on, every write of the state keeps the one before as a noncurrent
  generation: copying one back (`gcloud storage cp gs://...json#GEN gs://...json`, an
  `objects.rewrite` from that generation) rolls the stack's state back.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.gcs import FakeGcs
from tests.support.engine_stack import EngineWorkspace, cluster_nodes, require_engine
from tests.support.killed_runs import (
    CLUSTER,
    PROJECT,
    ZONE,
    cluster_yaml,
    invoke,
    kill_when,
    known_instances,
    ok,
    pending_operations,
    start_task,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]  # about two minutes

BUCKET, PREFIX = "team-ray-state", "clusters"
STATE_OBJECT = f"{PREFIX}/.pulumi/stacks/ray-gcp/{CLUSTER}.json"


@pytest.fixture
def team(tmp_path: Path) -> Iterator[tuple[dict[str, str], FakeComputeServer, FakeGcs, Path]]:
    bin_dir = require_engine()
    with FakeComputeServer(Faults(operation_s=0.0)) as fake, FakeGcs() as gcs:
        gcs.make_bucket(BUCKET, versioning=True)
        space = EngineWorkspace(fake, bin_dir, root=tmp_path / "engine")
        env = {**os.environ, **space.env,
               "PULUMI_BACKEND_URL": f"gs://{BUCKET}/{PREFIX}",
               "STORAGE_EMULATOR_HOST": gcs.endpoint,
               "RAY_GCP_STATE_DIR": str(tmp_path / "state-dir")}
        yield env, fake, gcs, tmp_path




def pulumi(env: dict[str, str], *args: str) -> str:
    """The pulumi CLI itself on the same bucket (as a teammate runs it)."""
    done = subprocess.run([str(Path(env["ENGINE_ROOT"]) / "bin" / "pulumi"), *args,
                           "--cwd", env["RAY_GCP_STATE_DIR"]],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def exported(env: dict[str, str]) -> dict:
    return json.loads(pulumi(env, "stack", "export", "--stack", CLUSTER))["deployment"]


def test_the_state_lives_in_the_bucket_a_killed_runs_lock_is_cleared_there_and_rolls_back(
        team) -> None:
    """One cluster's life on the bucket backend: killed, unlocked, converged, down; then a
    noncurrent generation of its state (the deployed one) copied back rolls the stack back."""
    env, fake, gcs, folder = team
    config = cluster_yaml(folder, workers=1)
    fake.faults.slow_operations = {"bulkInsert": 120.0}
    started = start_task(env, folder / "runs", "up", "-c", str(config), "-y")
    kill_when(started, lambda: fake.cloud.calls["bulkInsert"] >= 1, after_s=1.0)
    fake.faults.slow_operations = {}
    fake.cloud.release("bulkInsert")  # the cloud finishes the create the dead run started
    locks = [name for name in gcs.names(BUCKET) if "/.pulumi/locks/" in name]
    assert len(locks) == 1 and locks[0].startswith(f"{PREFIX}/.pulumi/locks/"), locks
    assert not (Path(env["RAY_GCP_STATE_DIR"]) / ".pulumi").exists()  # nothing local

    refused = invoke(env, "up", "-c", str(config), "-y")
    assert refused.returncode != 0
    assert f"`invoke unlock -s {CLUSTER}`" in refused.stderr, refused.stderr[-3000:]
    said = ok(invoke(env, "unlock", "-c", str(config)))
    assert "no longer running" in said, said  # read from the bucket's lock object
    assert not [name for name in gcs.names(BUCKET) if "/.pulumi/locks/" in name]

    ok(invoke(env, "up", "-c", str(config), "-y"))
    nodes = cluster_nodes(fake, PROJECT, ZONE, CLUSTER)
    assert len(nodes) == 2, nodes.keys()
    deployment = exported(env)
    assert pending_operations(deployment) == []
    assert set(nodes) <= known_instances(deployment)
    listed = json.loads(pulumi(env, "stack", "ls", "--json"))
    assert [stack["name"] for stack in listed] == [CLUSTER]

    ok(invoke(env, "down", "-c", str(config), "-y"))
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}
    assert not [r for r in exported(env).get("resources") or []
                if r["type"] == "gcp:compute/instance:Instance"]

    # The generation that held the deployed cluster, as `gcloud storage ls -a` lists them.
    base = f"http://{gcs.endpoint}/storage/v1/b/{BUCKET}/o"
    query = urllib.parse.urlencode({"prefix": STATE_OBJECT, "versions": "true"})
    with urllib.request.urlopen(f"{base}?{query}") as answer:
        versions = [item for item in json.load(answer)["items"] if item["name"] == STATE_OBJECT]
    assert len(versions) > 2, versions
    held = None
    for item in versions:
        with urllib.request.urlopen(f"{base}/{urllib.parse.quote(STATE_OBJECT, safe='')}?"
                                    f"alt=media&generation={item['generation']}") as answer:
            state = json.load(answer)["checkpoint"].get("latest") or {}
        if {r["urn"] for r in state.get("resources") or []} == \
                {r["urn"] for r in deployment["resources"]}:
            held = item["generation"]
    assert held is not None

    # `gcloud storage cp gs://B/O#GEN gs://B/O`: a rewrite from that generation
    target = urllib.parse.quote(STATE_OBJECT, safe="")
    request = urllib.request.Request(
        f"{base}/{target}/rewriteTo/b/{BUCKET}/o/{target}?sourceGeneration={held}",
        data=b"{}", method="POST", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request).close()
    rolled = exported(env)
    assert {r["urn"] for r in rolled["resources"]} == {r["urn"] for r in deployment["resources"]}
