"""Orphans, through the real engine, the stand-in gcp plugin and the fake cloud: what the cloud
holds of a cluster that no state of its stack knows is reported by `invoke preview`, `invoke
up`, `invoke status` and `invoke orphans`, one line each (what, where, why, the command that
adopts or deletes it), and deleted only by `invoke orphans --delete` naming the stack, after
asking.

One story on one stack (a real killed run leaves the orphans): `up` killed inside its worker
group's bulkInsert (the nodes exist, the state holds their create pending), plus a node made by
hand with the cluster's labels. The preview names both: the pending ones as `invoke up`
adopts them, the hand-made one with the delete command. The next `up` adopts the first (no
orphan line for them) and names the second, as `status` then does; `--delete` without naming
the stack, or without a terminal to ask on and no `-y`, deletes nothing; with `-s` and `-y` it
deletes the hand-made node alone, and the stack's nodes are untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.compute import FakeComputeServer
from tests.support.engine_stack import cluster_nodes
from tests.support.killed_runs import (
    CLUSTER,
    PROJECT,
    ZONE,
    cluster_yaml,
    exported_stack,
    invoke,
    kill_when,
    known_instances,
    ok,
    start_task,
    users_cloud,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]  # the story: about 2 minutes

HAND_MADE = f"ray-{CLUSTER}-by-hand"


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[dict[str, str], FakeComputeServer, Path]]:
    """A stack whose first `up` was killed inside the worker group's bulkInsert, its lock
    cleared, and a node made by hand with the cluster's labels."""
    folder = tmp_path_factory.mktemp("orphans")
    with users_cloud(folder) as (env, fake):
        config = cluster_yaml(folder, workers=2)
        fake.faults.slow_operations = {"bulkInsert": 120.0}
        started = start_task(env, folder / "runs", "up", "-c", str(config), "-y")
        kill_when(started, lambda: fake.cloud.calls["bulkInsert"] >= 1, after_s=1.0)
        fake.faults.slow_operations = {}
        ok(invoke(env, "unlock", "-s", CLUSTER))
        head = next(node for node in cluster_nodes(fake, PROJECT, ZONE, CLUSTER).values()
                    if node["labels"].get("ray-node-type") == "head")
        fake.cloud.insert_instances(PROJECT, ZONE, [HAND_MADE], {
            "machineType": f"zones/{ZONE}/machineTypes/n1-standard-2",
            "labels": {"ray-cluster-name": CLUSTER, "ray-node-type": "unmanaged",
                       "ray-user-node-type": "ray_worker_small"},
            "networkInterfaces": head["networkInterfaces"],
            "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
                "sourceImage": "projects/debian-cloud/global/images/family/debian-12"}}]},
            "insert", None)
        yield env, fake, config


def orphan_lines(said: str) -> list[str]:
    return [line for line in said.splitlines() if line.startswith("orphan: ")]


def test_orphans_are_reported_then_adopted_or_deleted_only_on_the_named_stacks_command(
        killed) -> None:
    env, fake, config = killed
    workers = [name for name, node in cluster_nodes(fake, PROJECT, ZONE, CLUSTER).items()
               if node["labels"].get("ray-gcp-group")]
    assert len(workers) == 2

    lines = orphan_lines(ok(invoke(env, "preview", "-c", str(config))))
    by_name = {line.split()[2]: line for line in lines}
    assert sorted(by_name) == sorted([*workers, HAND_MADE]), lines
    for name in workers:
        assert f"in {ZONE}: the state holds its create pending" in by_name[name], by_name[name]
        assert by_name[name].endswith(f"`invoke up -s {CLUSTER}` adopts it")
    assert "no state of the stack knows it" in by_name[HAND_MADE]
    assert f"`invoke orphans -s {CLUSTER} --delete`" in by_name[HAND_MADE]

    lines = orphan_lines(ok(invoke(env, "up", "-c", str(config), "-y")))
    assert [line.split()[2] for line in lines] == [HAND_MADE], lines  # the pending: adopted
    assert set(workers) <= known_instances(exported_stack(env, CLUSTER))
    status = invoke(env, "status", "-s", CLUSTER)  # the fake head has no sshd: the table only
    assert [line.split()[2] for line in orphan_lines(status.stdout)] == [HAND_MADE], \
        status.stdout[-3000:]

    refused = invoke(env, "orphans", "--delete", "-y")
    assert refused.returncode != 0 and "name the cluster's stack" in refused.stderr
    refused = invoke(env, "orphans", "-s", CLUSTER, "--delete")  # no terminal, no -y
    assert refused.returncode != 0 and "nothing deleted" in refused.stderr, refused.stderr
    assert HAND_MADE in cluster_nodes(fake, PROJECT, ZONE, CLUSTER)

    said = ok(invoke(env, "orphans", "-s", CLUSTER, "--delete", "-y"))
    assert f"deleted instance {HAND_MADE}" in said, said
    left = cluster_nodes(fake, PROJECT, ZONE, CLUSTER)
    assert HAND_MADE not in left and set(workers) <= set(left), sorted(left)
    assert "no orphan" in ok(invoke(env, "orphans", "-s", CLUSTER))

    ok(invoke(env, "down", "-c", str(config), "-y"))
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}
