"""Chaos over a cluster's life: `up`, two `scale`s and `down` of a cluster with a pinned worker
type and an autoscaled one (nodes Ray's autoscaler launched are added to the fake as it would:
the cluster's labels, `ray-node-type=worker`, no group label), each command run with a random
mix of Google's faults (503, 429 and 403 `rateLimitExceeded`, with or without `Retry-After`,
answers lost after the call took effect) on the worker groups' calls and on the gcp
provider's (the head, the firewall rules, the accounts and roles, the bucket, the secret),
and, at random, SIGKILLed at a random moment (after the k-th call the fake serves), whole
process tree. Then the same command is run again as a user would (with `invoke unlock` when
the next run says a killed one left its lock) until it succeeds, and the checks of a killed
run hold: exactly the nodes the stack wants, none twice, none no state knows (an orphan: nor
any other resource of the cluster, says `invoke orphans`), no pending operation in the state;
`down` leaves nothing.

Seeded and reproducible: `RAY_GCP_CHAOS_SEEDS=3,17` picks the scenarios (default one seed);
the seed is in every failure's message. Slow: a few minutes a seed.
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.faults import RATE_LIMITED_403
from tests.support.engine_stack import PROJECT_ROOT, cluster_nodes
from tests.support.killed_runs import (
    exported_stack,
    invoke,
    kill_when,
    known_instances,
    pending_operations,
    start_task,
    users_cloud,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]

CLUSTER = "chaos"
PROJECT, ZONE = "my-gcp-project", "us-west1-a"
PINNED, AUTOSCALED = "ray_worker_small", "ray_worker_auto"
SEEDS = [int(seed) for seed in os.environ.get("RAY_GCP_CHAOS_SEEDS", "7").split(",")]
FAULTY_METHODS = ("insert", "bulkInsert", "delete", "get", "list", "aggregatedList", "wait",
                  "setLabels", "setMetadata",
                  # what the gcp provider calls: the head's operation, the network's firewall
                  # rules, the service accounts and their roles, the bucket, the key's secret
                  "operations.get", "platform.firewalls.insert",
                  "platform.serviceAccounts.create", "platform.projects.setIamPolicy",
                  "storage.buckets.insert", "platform.secrets.create")
MAX_TRIES = 5


def chaos_cluster(folder: Path) -> Path:
    cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
    cluster["cluster_name"] = CLUSTER
    cluster.pop("docker", None)
    types = cluster["available_node_types"]
    worker = types[PINNED]
    worker["min_workers"], worker["max_workers"] = 0, 3
    auto = dict(worker, min_workers=1, max_workers=3)
    types[AUTOSCALED] = auto
    cluster["max_workers"] = 6
    path = folder / "chaos.yaml"
    path.write_text(yaml.safe_dump(cluster))
    return path


@dataclass
class Chaos:
    env: dict[str, str]
    fake: FakeComputeServer
    folder: Path
    rng: random.Random
    seed: int
    log: list[str]

    def invoke(self, *args: str) -> subprocess.CompletedProcess[str]:
        return invoke(self.env, *args)

    def faults(self) -> None:
        """A random fault mix for the next run."""
        faults = self.fake.faults
        statuses = [self.rng.choice([503, 429, RATE_LIMITED_403])
                    for _ in range(self.rng.randint(0, 3))]
        methods = set(self.rng.sample(FAULTY_METHODS, self.rng.randint(1, 3)))
        faults.fail_next(*statuses, methods=methods)
        faults.retry_after_s = self.rng.choice([None, 1])
        faults.dropped_answers = self.rng.sample(["bulkInsert", "delete", "insert"],
                                                 self.rng.randint(0, 1))
        self.log.append(f"faults {statuses} on {sorted(methods)}, retry-after "
                        f"{faults.retry_after_s}, dropped {faults.dropped_answers}")

    def calm(self) -> None:
        self.fake.faults.fail_next()
        self.fake.faults.retry_after_s = None
        self.fake.faults.dropped_answers = []

    def run(self, *args: str) -> None:
        """One command under faults, killed at random; then again until it succeeds."""
        self.faults()
        if self.rng.random() < 0.7:
            served = sum(self.fake.cloud.calls.values())
            point = served + self.rng.randint(1, 60)
            self.log.append(f"{' '.join(args)}: kill after call {point - served}")
            started = start_task(self.env, self.folder / "runs", *args)
            try:
                kill_when(started, lambda: sum(self.fake.cloud.calls.values()) >= point,
                          timeout=600)
            except AssertionError:  # it ended first: fine, unless it broke the rules
                self.log.append(f"  ended before the kill point (exit "
                                f"{started.process.returncode})")
                self.check_one_line(started.process.returncode, started.text())
                if started.process.returncode == 0:
                    self.calm()
                    return
        else:
            self.log.append(f"{' '.join(args)}: not killed")
            done = self.invoke(*args)
            self.check_one_line(done.returncode, done.stdout + done.stderr)
            if done.returncode == 0:
                self.calm()
                return
        self.calm()
        for _ in range(MAX_TRIES):
            done = self.invoke(*args)
            said = done.stdout + done.stderr
            if done.returncode == 0:
                self.log.append("  again: done")
                return
            self.check_one_line(done.returncode, said)
            self.log.append(f"  again: {said.strip().splitlines()[-1][:300]}")
            if "invoke unlock" in said:
                unlocked = self.invoke("unlock", "-s", CLUSTER)
                assert unlocked.returncode == 0, self.why(unlocked.stderr)
        raise AssertionError(self.why(f"`{' '.join(args)}` never succeeded"))

    def check_one_line(self, code: int, said: str) -> None:
        if code in (0, -9):
            return
        errors = [line for line in said.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, self.why(said[-3000:])
        assert "unexpected" not in errors[0] and "a bug" not in errors[0], self.why(errors[0])

    def why(self, what: str) -> str:
        return f"seed {self.seed}: {what}\n" + "\n".join(self.log)

    def autoscaler_adds(self, count: int) -> list[str]:
        """Nodes Ray's autoscaler launches for the autoscaled type: the cluster's and the
        stack's labels (as the head's provider sets them), no group label."""
        head = next(node for node in cluster_nodes(self.fake, PROJECT, ZONE, CLUSTER).values()
                    if node["labels"].get("ray-node-type") == "head")
        labels = {key: value for key, value in head["labels"].items()
                  if key in ("ray-cluster-name", "ray-gcp-stack")}
        names = [f"ray-{CLUSTER}-worker-auto{self.rng.randrange(16**6):06x}"
                 for _ in range(count)]
        body = {"machineType": f"zones/{ZONE}/machineTypes/n1-standard-2",
                "labels": {**labels, "ray-node-type": "worker",
                           "ray-user-node-type": AUTOSCALED, "ray-node-status": "up-to-date"},
                "networkInterfaces": [{"network": "global/networks/default"}],
                "disks": [{"boot": True, "autoDelete": True, "initializeParams": {
                    "sourceImage": "projects/debian-cloud/global/images/family/debian-12"}}]}
        for name in names:
            self.fake.cloud.insert_instances(PROJECT, ZONE, [name], dict(body), "insert", None)
        self.log.append(f"autoscaler added {names}")
        return names

    def converged(self, pinned: int, auto: int, autoscaler: list[str]) -> None:
        nodes = cluster_nodes(self.fake, PROJECT, ZONE, CLUSTER)
        kinds = sorted((node["labels"].get("ray-node-type", ""),
                        node["labels"].get("ray-user-node-type", "")) for node in nodes.values())
        wanted = sorted([("head", "ray_head_default")]
                        + [("unmanaged", PINNED)] * pinned + [("unmanaged", AUTOSCALED)] * auto
                        + [("worker", AUTOSCALED)] * len(autoscaler))
        assert kinds == wanted, self.why(f"nodes {kinds}, wanted {wanted}")
        deployment = exported_stack(self.env, CLUSTER)
        assert pending_operations(deployment) == [], self.why("pending operations left")
        orphans = set(nodes) - known_instances(deployment) - set(autoscaler)
        assert not orphans, self.why(f"orphans {orphans}")
        said = self.invoke("orphans", "-s", CLUSTER)  # nor any other resource of the cluster
        assert "no orphan" in said.stdout, self.why(said.stdout + said.stderr)
        self.log.append(f"converged: {len(nodes)} nodes")


@pytest.fixture
def chaos_user(tmp_path: Path) -> Iterator[tuple[dict[str, str], FakeComputeServer, Path]]:
    with users_cloud(tmp_path) as (env, fake):
        yield env, fake, tmp_path


@pytest.mark.parametrize("seed", SEEDS)
def test_chaos_over_up_scale_and_down_converges_every_time(chaos_user, seed: int) -> None:
    env, fake, folder = chaos_user
    chaos = Chaos(env, fake, folder, random.Random(seed), seed, [])
    config = str(chaos_cluster(folder))

    chaos.run("up", "-c", config, "-y")
    chaos.converged(0, 1, [])
    autoscaler = chaos.autoscaler_adds(chaos.rng.randint(1, 2))
    for _ in range(2):
        count = chaos.rng.randint(0, 3)
        chaos.run("scale", "-s", CLUSTER, "--type", PINNED, "--count", str(count), "-y")
        chaos.converged(count, 1, autoscaler)
    chaos.run("down", "-c", config, "-y")
    left = cluster_nodes(fake, PROJECT, ZONE, CLUSTER)
    assert left == {}, chaos.why(f"down left {sorted(left)}")
    assert pending_operations(exported_stack(env, CLUSTER)) == [], chaos.why("pending left")
    print(chaos.why("passed"))  # the scenario, for `pytest -rP`
