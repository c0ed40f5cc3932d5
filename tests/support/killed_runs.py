"""Runs of `invoke` that are killed half way, as a laptop that sleeps for good or a cancelled CI
job kills them: the task is started in a session of its own, and at the kill point every
process of its tree gets SIGKILL, group by group. The engine starts each plugin (the stand-in
gcp provider, the dynamic providers' python) in a process group of its own
(sdk/go/common/util/cmdutil/child_unix.go: `Setpgid`), so killing the task's group alone would
leave them running: the tree's groups are all killed, as a CI runner's cgroup kill does.

Also: the cluster's inventory in the fake against what the stack's state knows, the checks
a run killed half way must pass once the same command ran again.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import EngineWorkspace, require_engine
from tests.support.proc_table import children, parent_and_state
from tests.support.warm_python import run_module

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "killed-half-way"
PROJECT, ZONE = "my-gcp-project", "us-west1-a"


def cluster_yaml(folder: Path, workers: int) -> Path:
    """minimal.yaml with a pinned worker type of `workers` nodes."""
    cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
    cluster["cluster_name"] = CLUSTER
    cluster.pop("docker", None)
    worker = cluster["available_node_types"]["ray_worker_small"]
    worker["min_workers"] = worker["max_workers"] = workers
    cluster["max_workers"] = workers
    path = folder / "cluster.yaml"
    path.write_text(yaml.safe_dump(cluster))
    return path


@dataclass
class Started:
    """A task started in its own session; its output goes to files (a pipe nobody reads
    would block it)."""

    process: subprocess.Popen[bytes]
    output: Path

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait(self, timeout: float = 600) -> int:
        return self.process.wait(timeout=timeout)


def start_task(env: dict[str, str], folder: Path, *args: str) -> Started:
    """`invoke <args>` in the project, in a session (so a process group) of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    output = folder / f"run-{time.monotonic_ns()}.log"
    with output.open("wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "invoke", *args], cwd=PROJECT_ROOT,
                                   env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    return Started(process, output)


def process_tree(root: int) -> list[int]:
    """`root` and every process below it."""
    tree_of, tree, todo = children(), [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(tree_of.get(pid, []))
    return tree


def kill_tree(root: int) -> None:
    """SIGKILL every process group of `root`'s tree (its own first), until none is left. The
    tree is followed from every process ever seen in it: a child whose parent was killed is
    re-parented away from `root`, and a plugin the engine started between a listing and the
    kill is found by the next listing."""
    seen: set[int] = {root}
    for _ in range(40):
        listed = children()
        todo = list(seen)
        while todo:
            for child in listed.get(todo.pop(), []):
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        groups = set()
        for pid in seen:
            with contextlib.suppress(OSError):
                if parent_and_state(pid)[1] != "Z":
                    groups.add(os.getpgid(pid))
        if not groups:
            return
        for group in sorted(groups, key=lambda g: g != root):
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
        time.sleep(0.05)


def wait_gone(pids: list[int], timeout: float = 120) -> None:
    """Until none of `pids` runs (a zombie counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                _, state = parent_and_state(pid)
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        if not alive:
            return
        time.sleep(0.1)
    raise AssertionError(f"still running after {timeout}s: {alive}")


def kill_when(started: Started, condition: Callable[[], bool], timeout: float = 300,
              after_s: float = 0.0) -> None:
    """Wait for `condition` (polled), then `after_s` more, then kill the task's whole tree.
    The task must still be running when the condition holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if started.process.poll() is not None:
            raise AssertionError(f"the task ended (exit {started.process.returncode}) before "
                                 f"the kill point:\n{started.text()[-4000:]}")
        if time.monotonic() > deadline:
            kill_tree(started.process.pid)
            raise AssertionError(f"no kill point within {timeout}s:\n{started.text()[-4000:]}")
        time.sleep(0.02)
    time.sleep(after_s)
    # The plugins' groups are found through the tree, so take it before its root dies.
    kill_tree(started.process.pid)
    started.process.wait(timeout=30)


def pending_operations(deployment: dict[str, Any]) -> list[tuple[str, str]]:
    """(type, URN) of each pending operation in an exported state."""
    return [(op.get("type", ""), op["resource"]["urn"])
            for op in deployment.get("pending_operations") or []]


def known_instances(deployment: dict[str, Any]) -> set[str]:
    """The instance and TPU node names the stack's state knows: the head's resource and each
    worker group's nodes (its outputs list them)."""
    names: set[str] = set()
    for resource in deployment.get("resources") or []:
        if resource.get("delete"):
            continue
        kind, outputs = resource.get("type", ""), resource.get("outputs") or {}
        if kind in ("gcp:compute/instance:Instance", "gcp:tpu/v2Vm:V2Vm"):
            names.add(str(outputs.get("name") or (resource.get("inputs") or {}).get("name")))
        for key in ("instance_names", "stopped_instance_names"):
            names.update(str(name) for name in outputs.get(key) or [])
    return names


USERS_OWN = ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")
"""What a user who set up nothing for pulumi does not have: `up -c` keeps the stack in the
state folder's file backend (its secrets under the workspace's fake Vault key, which
RAY_GCP_SECRETS_PROVIDER names, as a team's key service would)."""


def exported_stack(env: dict[str, str], stack: str) -> dict[str, Any]:
    """`pulumi stack export` of a stack `up -c` keeps in the state folder's file backend."""
    state_dir = Path(env["RAY_GCP_STATE_DIR"])
    done = subprocess.run(
        [str(Path(env["ENGINE_ROOT"]) / "bin" / "pulumi"), "stack", "export", "--stack",
         stack, "--cwd", str(state_dir)],
        env={**env, "PULUMI_BACKEND_URL": f"file://{state_dir}",
             "PULUMI_CONFIG_PASSPHRASE_FILE": str(state_dir / ".pulumi-passphrase")},
        capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout)["deployment"]


@contextlib.contextmanager
def users_cloud(folder: Path) -> Iterator[tuple[dict[str, str], FakeComputeServer]]:
    """The fake cloud, and the environment of a user who set up nothing for pulumi (the
    engine pointed at the fake, the state folder in `folder`)."""
    bin_dir = require_engine()
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir, root=folder / "engine")
        env = {key: value for key, value in {**os.environ, **space.env}.items()
               if key not in USERS_OWN}
        env["RAY_GCP_STATE_DIR"] = str(folder / "state-dir")
        yield env, fake


def invoke(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`invoke <args>` run to its end."""
    return run_module(["invoke", *args], cwd=PROJECT_ROOT, env=env, timeout=900)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    """What a task that must succeed said."""
    assert done.returncode == 0, f"{done.args[3:]}:\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    return done.stdout + done.stderr
