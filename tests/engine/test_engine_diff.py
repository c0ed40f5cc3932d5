"""Our offline `invoke diff` against the engine's own preview, on a deployed stack: for a
table of edits, the same resources (type and logical name) with the same operation (add,
remove, replace, update), then `up` does it; and a node deleted behind Pulumi's back comes
back after refresh and up.

The engine's preview decides replace vs update with the stand-in gcp plugin's rules
(terraform-provider-google's ForceNew fields) and our dynamic providers' own diffs; the
offline plan decides it with ops.review.plan_diff's rules. A disagreement fails with both sides.
What the change does to a running node is said the same way too: `invoke preview`'s progress
line, worded from the engine's detailed diff (the stand-in's paths, as the bridge gives them),
and `invoke diff`'s, from the offline plan.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from ops.review.plan import plan_stack
from ops.review.plan_diff import diff_plans
from ops.review.plan_effects import CONFIG_NOTE, node_effect
from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import (
    PROJECT_ROOT,
    EngineRun,
    EngineWorkspace,
    cluster_nodes,
)

Edit = Callable[[dict[str, Any]], None]
Key = tuple[str, str]  # (type token, logical name)
WORKER = "ray_worker_small"


def _cluster(stack: str) -> dict[str, Any]:
    return yaml.safe_load((PROJECT_ROOT / f"stacks/clusters/{stack}.yaml").read_text())


def _types(cluster: dict[str, Any]) -> dict[str, Any]:
    return cluster["available_node_types"]


def _head(cluster: dict[str, Any]) -> dict[str, Any]:
    return _types(cluster)[cluster["head_node_type"]]["node_config"]


def _more_workers(cluster: dict[str, Any]) -> None:
    _types(cluster)[WORKER]["min_workers"] = 2


def _setup_command(cluster: dict[str, Any]) -> None:
    cluster["setup_commands"] = [*cluster.get("setup_commands", []), "echo engine-diff"]


def _head_machine(cluster: dict[str, Any]) -> None:
    _head(cluster)["machineType"] = "n1-standard-8"


def _worker_machine(cluster: dict[str, Any]) -> None:
    _types(cluster)[WORKER]["node_config"]["machineType"] = "n2-standard-4"


def _head_label(cluster: dict[str, Any]) -> None:
    _head(cluster)["labels"] = {"team": "ml"}


def _worker_label(cluster: dict[str, Any]) -> None:
    _types(cluster)[WORKER]["node_config"]["labels"] = {"team": "ml"}


def _head_disk(cluster: dict[str, Any]) -> None:
    _head(cluster)["disks"][0]["initializeParams"]["diskSizeGb"] = 100


def _worker_disk(cluster: dict[str, Any]) -> None:
    _types(cluster)[WORKER]["node_config"]["disks"][0]["initializeParams"]["diskSizeGb"] = 100


def _ssh_ranges(cluster: dict[str, Any]) -> None:
    cluster["provider"]["ssh_source_ranges"] = ["10.0.0.0/8"]


def _other_network(cluster: dict[str, Any]) -> None:
    """Every compute type on a network of its own: the firewalls follow it."""
    network = "projects/my-gcp-project/global/networks/ray"
    for node_type in _types(cluster).values():
        node_type["node_config"]["networkInterfaces"] = [{
            "network": network,
            "subnetwork": "projects/my-gcp-project/regions/us-west1/subnetworks/ray",
            "accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}],
        }]


def _tpu_runtime(cluster: dict[str, Any]) -> None:
    for node_type in _types(cluster).values():
        if "runtimeVersion" in node_type["node_config"]:
            node_type["node_config"]["runtimeVersion"] = "tpu-ubuntu2204-base"


EDITS: list[tuple[str, str, Edit]] = [
    ("full", "worker count", _more_workers),
    ("full", "setup command", _setup_command),
    ("full", "head machine type", _head_machine),
    ("full", "worker machine type", _worker_machine),
    ("full", "head label", _head_label),
    ("full", "worker label", _worker_label),
    ("full", "head disk size", _head_disk),
    ("full", "worker disk size", _worker_disk),
    ("full", "SSH source ranges", _ssh_ranges),
    ("full", "network", _other_network),
    ("tpu", "TPU runtime", _tpu_runtime),
]


def write_stack(root: Path, stack: str, cluster: dict[str, Any]) -> Path:
    """An edited copy of the stack under `root`, as `ops.review.plan --root` reads it."""
    path = root / "stacks" / "clusters" / f"{stack}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cluster))
    (root / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(
        {"config": {"ray-gcp:cluster": f"stacks/clusters/{stack}.yaml"}}))
    return path


def offline_operations(base: dict[str, Any], head: dict[str, Any]) -> dict[Key, str]:
    """`invoke diff`'s rows as (type, name) -> operation; a replacement under a new name is
    the new name added and the old removed, as Pulumi sees two resources."""
    custom = {(r["type"], r["name"]) for plan in (base, head) for r in plan["resources"]
              if r["custom"]}
    found: dict[Key, str] = {}
    for row in diff_plans(base, head):
        old, new = (row.type, row.old_name or ""), (row.type, row.new_name or "")
        if row.action == "replace" and row.old_name != row.new_name:
            found[new], found[old] = "add", "remove"
        elif row.action == "remove":
            found[old] = "remove"
        else:
            found[new] = row.action
    return {key: op for key, op in found.items() if key in custom}


def offline_effects(base: dict[str, Any], head: dict[str, Any]) -> dict[Key, str | None]:
    """`invoke diff`'s effect line per node it updates or replaces."""
    return {(row.type, row.new_name or ""): node_effect(row) for row in diff_plans(base, head)
            if row.action in ("update", "replace")}


def engine_effects(run: EngineRun) -> dict[Key, str | None]:
    """The effect `invoke preview` prints after a step that updates or replaces a resource:
    `  update   NAME (TYPE)... (EFFECT)`."""
    found: dict[Key, str | None] = {}
    for step in run.steps:
        if step["op"] in ("update", "replace"):
            _, _, effect = step["line"].partition(f"({step['type']})... ")
            found[(step["type"], step["urn"].rsplit("::", 1)[1])] = effect[1:-1] or None
    return found


def engine_operations(run: EngineRun) -> dict[Key, str]:
    types = {step["urn"]: step["type"] for step in run.steps}
    return {(types[urn], urn.rsplit("::", 1)[1]): op for urn, op in run.operations().items()
            if not types[urn].startswith("pulumi:providers:")}


@dataclass
class Deployed:
    space: EngineWorkspace
    plans: dict[str, dict[str, Any]]  # stack -> its offline plan as deployed
    paths: dict[str, Path]  # stack -> its cluster YAML as deployed
    # stacks a test deployed otherwise: their YAML as deployed goes up again before the next
    # test that compares against the base plan (none, in the module's order, so no `up` is run
    # for nothing after the last test)
    changed: set[str] = field(default_factory=set)

    def restore(self, stack: str) -> None:
        self.space.write_stack(stack, {"ray-gcp:cluster": str(self.paths[stack])})

    def as_deployed(self, stack: str) -> None:
        """The stack's deployment as the fixture made it: `up` again if a test changed it."""
        if stack in self.changed:
            self.restore(stack)
            self.space.run(stack, "up")
            self.changed.discard(stack)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


@pytest.fixture(scope="module")
def deployed(engine_bin: Path, fake: FakeComputeServer, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Deployed]:
    """`full` and `tpu` up, from their YAML as the repo has it; their offline base plans."""
    space = EngineWorkspace(fake, engine_bin)
    root = tmp_path_factory.mktemp("base")
    plans, paths = {}, {}
    for stack in ("full", "tpu"):
        paths[stack] = write_stack(root, stack, _cluster(stack))
        plans[stack] = plan_stack(stack, root)
        space.write_stack(stack, {"ray-gcp:cluster": str(paths[stack])})
        space.run(stack, "up")
    yield Deployed(space, plans, paths)
    # No `destroy`: the fake cloud ends with the module and the state with the workspace (that
    # every stack destroys to nothing is tests/engine/test_engine_stacks.py's to prove).
    space.cleanup()


# slow: the case that runs first starts `deployed` (two ups), 52-65 s in all on a loaded 2-core
# machine
@pytest.mark.slow
@pytest.mark.parametrize(("stack", "what", "edit"), EDITS, ids=[e[1] for e in EDITS])
def test_engine_preview_agrees_with_offline_diff(
    stack: str, what: str, edit: Edit, deployed: Deployed, tmp_path: Path
) -> None:
    space = deployed.space
    deployed.as_deployed(stack)
    cluster = copy.deepcopy(_cluster(stack))
    edit(cluster)
    path = write_stack(tmp_path, stack, cluster)
    head_plan = plan_stack(stack, tmp_path)
    space.write_stack(stack, {"ray-gcp:cluster": str(path)})
    try:
        preview = space.run(stack, "preview")
    finally:
        deployed.restore(stack)
    engine = engine_operations(preview)
    ours = offline_operations(deployed.plans[stack], head_plan)
    assert engine, f"{what}: the engine saw no change"
    assert engine == ours, f"{what}: engine {sorted(engine.items())} vs offline " \
                           f"{sorted(ours.items())}"
    effects = engine_effects(preview)
    offline_said = offline_effects(deployed.plans[stack], head_plan)
    said = {key: offline_said.get(key) for key in effects if key in offline_said}
    assert {key: effects[key] for key in said} == said, f"{what}: effects differ"
    if what == "worker count":  # only the head's autoscaler config changes: no stop/start
        assert CONFIG_NOTE in effects.values(), effects


@pytest.mark.slow  # over 60 s on the loaded 2-core machine
def test_up_scales_and_a_deleted_worker_comes_back_after_refresh(
    deployed: Deployed, fake: FakeComputeServer, tmp_path: Path
) -> None:
    space = deployed.space
    project, zone = "my-gcp-project", "us-west1-a"
    cluster = _cluster("full")
    _more_workers(cluster)
    space.write_stack("full", {"ray-gcp:cluster": str(write_stack(tmp_path, "full", cluster))})
    deployed.changed.add("full")
    try:
        space.run("full", "up")

        def workers() -> list[str]:
            return sorted(name for name, node in cluster_nodes(fake, project, zone,
                                                               "full").items()
                          if node["labels"].get("ray-user-node-type") == WORKER)

        assert len(workers()) == 2
        gone = workers()[0]
        fake.cloud.preempt(project, zone, gone)
        refresh = space.run("full", "refresh")
        assert refresh.summary.get("update", 0) >= 1, refresh.summary
        space.run("full", "up")
        assert len(workers()) == 2 and gone not in workers()
    finally:
        deployed.restore("full")
