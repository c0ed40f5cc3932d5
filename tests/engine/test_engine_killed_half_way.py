"""`invoke up -c cluster.yaml` killed half way (SIGKILL of its whole process tree: invoke, the
engine, its plugins), then run again, through the real pulumi engine against the fake cloud and
the stand-in gcp plugin, on the file backend `up -c` keeps the stack in:

- the lock the killed run held is shown (who, since when, that its process is gone) with the
  command that clears it, `invoke unlock`, never cleared silently; pulumi's own advice
  (`pulumi cancel`) is not given, as it needs the tool's backend;
- once unlocked, the same `up` says what it found (the pending creates the kill left) and
  converges: the head the killed run inserted is adopted (it is read back from the cloud by
  name), the worker group's nodes likewise (by their group label), nothing is created twice,
  no pending operation stays in the state, and `down` leaves nothing of the cluster;
- Ctrl-C (SIGINT to the task's group) stops it gracefully, saying how to resume, and the
  same command resumes;
- two first `up`s of a new stack started together: one creates the cluster, the other ends in
  one line naming the lock's holder (or waits its turn), never "unexpected ...".
"""

from __future__ import annotations

import os
import signal
import time
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
    pending_operations,
    process_tree,
    start_task,
    users_cloud,
    wait_gone,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]  # each test: 1-2 minutes

HELD_S = 120.0
"""How long the operation the kill waits on stays RUNNING: the run is killed inside it."""


@pytest.fixture
def user(tmp_path: Path) -> Iterator[tuple[dict[str, str], FakeComputeServer, Path]]:
    with users_cloud(tmp_path) as (env, fake):
        yield env, fake, tmp_path




def converged(env: dict[str, str], fake: FakeComputeServer, workers: int) -> None:
    """The checks after a killed run's command ran again: exactly the nodes the stack wants,
    each known to the state (no orphan), none twice, no pending operation left."""
    nodes = cluster_nodes(fake, PROJECT, ZONE, CLUSTER)
    kinds = sorted(node["labels"].get("ray-node-type", "") == "head" for node in nodes.values())
    assert kinds == [False] * workers + [True], nodes.keys()
    deployment = exported_stack(env, CLUSTER)
    assert pending_operations(deployment) == []
    assert set(nodes) <= known_instances(deployment), (set(nodes), known_instances(deployment))


def the_one_line(said: str) -> str:
    lines = [line for line in said.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1, said[-4000:]
    assert "unexpected" not in lines[0] and "a bug" not in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("kill_at", ["insert", "bulkInsert"])
def test_a_run_killed_inside_a_create_shows_its_lock_then_converges(user, kill_at: str) -> None:
    env, fake, folder = user
    config = cluster_yaml(folder, workers=2)
    fake.faults.slow_operations = {kill_at: HELD_S}
    started = start_task(env, folder / "runs", "up", "-c", str(config), "-y")
    kill_when(started, lambda: fake.cloud.calls[kill_at] >= 1, after_s=1.0)
    fake.faults.slow_operations = {}
    fake.cloud.release(kill_at)  # the cloud finishes the create the dead run started

    refused = invoke(env, "up", "-c", str(config), "-y")
    assert refused.returncode != 0
    line = the_one_line(refused.stdout + refused.stderr)
    assert "pulumi cancel" not in line
    assert f"`invoke unlock -s {CLUSTER}`" in line, line
    assert "no longer running" in line, line  # its pid is gone on this machine

    said = ok(invoke(env, "unlock", "-s", CLUSTER))
    assert "cleared" in said
    said = ok(invoke(env, "up", "-c", str(config), "-y"))
    assert "pending" in said  # it says what it found
    converged(env, fake, workers=2)  # no pending operation left for the next run to meet

    ok(invoke(env, "down", "-c", str(config), "-y"))
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}


def test_two_first_ups_of_a_new_stack_one_runs_the_other_says_one_line(user) -> None:
    env, fake, folder = user
    config = cluster_yaml(folder, workers=1)
    runs = [start_task(env, folder / "runs", "up", "-c", str(config), "-y") for _ in range(2)]
    codes = [run.wait() for run in runs]
    assert 0 in codes, [run.text()[-3000:] for run in runs]
    for run, code in zip(runs, codes, strict=True):
        if code != 0:
            line = the_one_line(run.text())
            assert "locked" in line or "already" in line, line
    converged(env, fake, workers=1)
    ok(invoke(env, "down", "-c", str(config), "-y"))
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}


def test_ctrl_c_stops_the_run_gracefully_and_the_same_command_resumes(user) -> None:
    """SIGINT to the task's process group, as Ctrl-C in its terminal sends it, while a worker
    group's bulkInsert runs: the engine finishes the call in flight, records it and releases
    the lock, the task waits for it and says how to resume, nothing of the run is left
    running, and the same `up` then runs without `unlock`."""
    env, fake, folder = user
    config = cluster_yaml(folder, workers=2)
    fake.faults.slow_operations = {"bulkInsert": 5.0}
    started = start_task(env, folder / "runs", "up", "-c", str(config), "-y")
    while fake.cloud.calls["bulkInsert"] < 1:
        assert started.process.poll() is None, started.text()[-3000:]
        time.sleep(0.05)
    tree = process_tree(started.process.pid)
    os.killpg(started.process.pid, signal.SIGINT)
    assert started.wait(timeout=120) == 130
    said = started.text()
    assert said.strip().splitlines()[-1] == ("error: interrupted: the engine finished the calls "
                                            "in flight and recorded them; run the same command "
                                            "again to resume"), said[-3000:]
    wait_gone(tree)  # nothing of the run left behind
    assert not list(Path(env["RAY_GCP_STATE_DIR"]).glob(".pulumi/locks/**/*.json"))
    fake.faults.slow_operations = {}

    ok(invoke(env, "up", "-c", str(config), "-y"))
    converged(env, fake, workers=2)
    ok(invoke(env, "down", "-c", str(config), "-y"))
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}


def test_a_scale_or_down_while_an_up_runs_is_refused_in_one_line(user) -> None:
    """`invoke scale` and `invoke down` of a stack whose `up` is running (held inside a worker
    group's bulkInsert): each ends in one line naming the running up's lock; the up finishes
    untouched."""
    env, fake, folder = user
    config = cluster_yaml(folder, workers=1)
    # Held until both are refused, however long they take on a loaded machine, then released.
    fake.faults.slow_operations = {"bulkInsert": 900.0}
    started = start_task(env, folder / "runs", "up", "-c", str(config), "-y")
    while fake.cloud.calls["bulkInsert"] < 1:
        assert started.process.poll() is None, started.text()[-3000:]
        time.sleep(0.05)
    for args in (("down", "-c", str(config), "-y"),
                 ("scale", "-s", CLUSTER, "--type", "ray_worker_small", "--count", "1", "-y")):
        assert started.process.poll() is None, "the up ended before the refusals were tried"
        refused = invoke(env, *args)
        assert refused.returncode != 0
        line = the_one_line(refused.stdout + refused.stderr)
        assert "still running" in line and "wait for that run to end" in line, line
    assert started.process.poll() is None, "the up ended while it was held"
    fake.faults.slow_operations = {}
    fake.cloud.release("bulkInsert")
    assert started.wait() == 0, started.text()[-3000:]
    converged(env, fake, workers=1)
