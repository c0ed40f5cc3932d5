"""`--wait[=DURATION]`: a run queues behind the run that holds its stack's lock, through the real
engine with the team's state in a bucket of the fake Cloud Storage (the engine's own `gs://`
client, STORAGE_EMULATOR_HOST) and the fake cloud, two real runs at once:

- a `scale` queued behind a colleague's running `scale` says once who holds the lock (user,
  host, pid, their command, since when), waits, then runs when the lock is released, and
  both end well;
- one whose wait ends first gives up in the lock's one line, saying how long it waited;
- Ctrl-C while waiting ends it at once, having done nothing: no lock of its own left, the
  running one untouched.
One stack for the module: the story runs in order.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.gcs import FakeGcs
from tests.support.engine_stack import EngineWorkspace, cluster_nodes, require_engine
from tests.support.killed_runs import (
    CLUSTER,
    PROJECT,
    PROJECT_ROOT,
    ZONE,
    Started,
    invoke,
    ok,
    start_task,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]  # about three minutes

BUCKET = "team-ray-state"
TYPE = "ray_worker_small"
HELD_S = 300.0
"""How long the holder's node operations stay RUNNING unless `release`d: the other run meets
its lock whatever the machine's load."""


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[dict[str, str], FakeComputeServer, FakeGcs, Path]]:
    folder = tmp_path_factory.mktemp("lock-wait")
    bin_dir = require_engine()
    with FakeComputeServer(Faults(operation_s=0.0)) as fake, FakeGcs() as gcs:
        gcs.make_bucket(BUCKET, versioning=True)
        space = EngineWorkspace(fake, bin_dir, root=folder / "engine")
        env = {**os.environ, **space.env, "PULUMI_BACKEND_URL": f"gs://{BUCKET}",
               "STORAGE_EMULATOR_HOST": gcs.endpoint,
               "RAY_GCP_STATE_DIR": str(folder / "state-dir")}
        cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
        cluster["cluster_name"] = CLUSTER
        cluster.pop("docker", None)
        cluster["available_node_types"][TYPE].update(min_workers=0, max_workers=3)
        cluster["max_workers"] = 3
        config = folder / "cluster.yaml"
        config.write_text(yaml.safe_dump(cluster))
        ok(invoke(env, "up", "-c", str(config), "-y"))
        yield env, fake, gcs, folder
        ok(invoke(env, "down", "-c", str(config), "-y"))
        assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}


def scale(count: int, *more: str) -> tuple[str, ...]:
    return ("scale", "-s", CLUSTER, "--type", TYPE, "--count", str(count), "-y", *more)


def holding(env: dict[str, str], fake: FakeComputeServer, gcs: FakeGcs, folder: Path,
            count: int, method: str) -> Started:
    """A colleague's `scale` to `count`, started and held inside its node `method`'s
    operation (so holding the stack's lock in the bucket) until `release`."""
    fake.faults.slow_operations = {method: HELD_S}
    before = fake.cloud.calls[method]
    started = start_task(env, folder / "runs", *scale(count))
    while fake.cloud.calls[method] <= before:
        assert started.process.poll() is None, started.text()[-3000:]
        time.sleep(0.05)
    assert locks(gcs), "the holder holds no lock"
    return started


def release(fake: FakeComputeServer, method: str) -> None:
    """The holder's held operations end now, and the ones to come are quick."""
    fake.faults.slow_operations = {}
    with fake.cloud.changed:
        for operation in fake.cloud.operations.values():
            if operation.operation_type == method and not operation.done:
                operation.done_at = time.monotonic()
        fake.cloud.changed.notify_all()


def locks(gcs: FakeGcs) -> list[str]:
    return [name for name in gcs.names(BUCKET) if name.startswith(".pulumi/locks/")]


def wait_for(started: Started, text: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while text not in started.text():
        assert started.process.poll() is None, started.text()[-3000:]
        assert time.monotonic() < deadline, started.text()[-3000:]
        time.sleep(0.1)
    return started.text()


def workers(fake: FakeComputeServer) -> int:
    return sum(node["labels"].get("ray-node-type") != "head"
               for node in cluster_nodes(fake, PROJECT, ZONE, CLUSTER).values())


def test_a_run_with_wait_queues_behind_the_holder_then_runs(team) -> None:
    env, fake, gcs, folder = team
    holder = holding(env, fake, gcs, folder, 2, "bulkInsert")
    waiter = start_task(env, folder / "runs", *scale(3, "--wait=5m"))
    said = wait_for(waiter, "waiting up to 5 min")
    line = next(line for line in said.splitlines() if "waiting up to" in line)
    assert f"for stack {CLUSTER!r}: it is locked by " in line, line
    assert f"`invoke {' '.join(scale(2))}`" in line and "still running) since " in line, line
    release(fake, "bulkInsert")
    assert holder.wait() == 0, holder.text()[-3000:]
    assert waiter.wait() == 0, waiter.text()[-3000:]
    assert waiter.text().count("waiting up to") == 1  # said once
    assert workers(fake) == 3
    assert not locks(gcs)


def test_a_wait_that_ends_first_gives_up_in_the_locks_one_line(team) -> None:
    env, fake, gcs, folder = team
    holder = holding(env, fake, gcs, folder, 1, "delete")
    given_up = invoke(env, *scale(1, "--wait=3s"))
    assert holder.process.poll() is None  # it gave up while the holder held on
    errors = [line for line in given_up.stderr.splitlines() if line.startswith("error:")]
    assert given_up.returncode != 0 and len(errors) == 1, given_up.stderr[-3000:]
    assert f"cannot up stack {CLUSTER!r}: it is locked by" in errors[0], errors[0]
    assert errors[0].endswith("(waited 3 s for it)"), errors[0]
    release(fake, "delete")
    assert holder.wait() == 0, holder.text()[-3000:]
    assert workers(fake) == 1


def test_ctrl_c_while_waiting_leaves_nothing(team) -> None:
    env, fake, gcs, folder = team
    holder = holding(env, fake, gcs, folder, 2, "bulkInsert")
    held = locks(gcs)
    waiter = start_task(env, folder / "runs", "down", "-s", CLUSTER, "-y", "--wait")
    wait_for(waiter, "waiting up to 30 min")
    os.killpg(waiter.process.pid, signal.SIGINT)
    assert waiter.wait(timeout=120) == 130  # generous: a loaded 2-core machine is slow to exit
    assert waiter.text().strip().splitlines()[-1] == (
        f"error: interrupted while waiting for the lock of stack {CLUSTER!r}: nothing was done")
    assert locks(gcs) == held  # the holder's alone
    release(fake, "bulkInsert")
    assert holder.wait() == 0, holder.text()[-3000:]
    assert workers(fake) == 2 and not locks(gcs)
