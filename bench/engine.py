"""Ratio benchmark: the real pulumi engine on the `full` stack, against the stand-in gcp
plugin and the fake cloud (tests/fakes/standin_gcp, tests/fakes/compute).

1. `pulumi up` of `full` on an empty fake, as a ratio to the same engine running a minimal
   program that registers as many custom resources (cheap `gcp.projects.Service`s through the
   same plugin): what our program and its dynamic providers add over the engine's own cost.
2. `invoke diff`'s way (both plans offline, in parallel, then the diff) against the engine's
   `pulumi preview` of the same change (one more worker), on the deployed stack.

Run from the project root once `invoke engine` installed the engine:
`python -m bench.engine`. It prints the timings and both ratios; no target.
"""

from __future__ import annotations

import copy
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ops.review.plan import collect_plan, plan_stack_isolated
from ops.review.plan_diff import diff_plans
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.identity import signed_in_user
from tests.support.engine_stack import PROJECT_ROOT, EngineWorkspace, installed_engine_bin

MINIMAL_PROGRAM = '''
import pulumi_gcp as gcp

for index in range({count}):
    gcp.projects.Service(f"service-{{index}}", project="bench-project",
                         service=f"bench{{index}}.googleapis.com", disable_on_destroy=False)
'''


def custom_resources(deployment: dict) -> int:
    """Resources with a provider of their own: neither the stack, components nor providers."""
    return sum(1 for r in deployment.get("resources", [])
               if r.get("custom") and not r["type"].startswith("pulumi:providers:"))


def write_stack(root: Path, cluster: dict) -> Path:
    path = root / "stacks" / "clusters" / "full.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cluster))
    (root / "stacks" / "Pulumi.full.yaml").write_text(
        yaml.safe_dump({"config": {"ray-gcp:cluster": "stacks/clusters/full.yaml"}}))
    return path


def main() -> int:
    bin_dir = installed_engine_bin()
    if bin_dir is None:
        print("the pulumi engine is not installed: run `invoke engine` first", file=sys.stderr)
        return 1
    base_cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
    edited = copy.deepcopy(base_cluster)
    worker = edited["available_node_types"]["ray_worker_small"]
    worker["min_workers"] = worker["max_workers"]
    with signed_in_user(), FakeComputeServer(Faults(operation_s=0.0)) as fake, \
            tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        space = EngineWorkspace(fake, bin_dir, root=Path(tmp) / "engine")
        base_path = write_stack(Path(tmp) / "base", base_cluster)
        space.write_stack("full", {"ray-gcp:cluster": str(base_path)})
        ours = space.run("full", "up")
        count = custom_resources(space.export("full"))

        program = Path(tmp) / "minimal.py"
        program.write_text(MINIMAL_PROGRAM.format(count=count))
        space.write_stack("minimal-program", {})
        floor = space.run("minimal-program", "up", program=program)

        began = time.perf_counter()
        edited_root = Path(tmp) / "edited"
        write_stack(edited_root, edited)
        base_run = plan_stack_isolated("full", base_path.parents[2])
        head_run = plan_stack_isolated("full", edited_root)
        rows = diff_plans(collect_plan(base_run, "full"), collect_plan(head_run, "full"))
        offline_s = time.perf_counter() - began

        space.write_stack("full", {"ray-gcp:cluster": str(edited_root /
                                                         "stacks/clusters/full.yaml")})
        preview = space.run("full", "preview")

        space.write_stack("full", {"ray-gcp:cluster": str(base_path)})
        space.run("full", "destroy")
        space.run("minimal-program", "destroy", program=program)

    print(f"pulumi up of full ({count} custom resources): {ours.seconds:.1f} s")
    print(f"pulumi up of a minimal program with {count} resources: {floor.seconds:.1f} s")
    print(f"invoke diff (two offline plans + diff, {len(rows)} rows): {offline_s:.1f} s")
    print(f"pulumi preview of the same change: {preview.seconds:.1f} s")
    print(f"ratio up full:minimal = {ours.seconds / floor.seconds:.2f}")
    print(f"ratio invoke diff:pulumi preview = {offline_s / preview.seconds:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
