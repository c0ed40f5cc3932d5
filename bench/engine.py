"""Ratio benchmark: the real pulumi engine on the `full` stack, against the stand-in gcp
plugin and the fake cloud (tests/fakes/standin_gcp, tests/fakes/compute).

1. `pulumi up` of `full` on an empty fake, as a ratio to the same engine running a minimal
   program that registers as many custom resources (cheap `gcp.projects.Service`s through the
   same plugin): what our program and its dynamic providers add over the engine's own cost.
   Target 1.5x.
2. A no-change `invoke up` of `full` as a user runs it (the checks `invoke plan` makes, the
   refresh and the update, the outputs and the summary), as a ratio to a no-change `pulumi up`
   of the minimal program, measured next to it. Target 1.2x.
3. `invoke diff`'s way (both plans offline, in parallel, then the diff) against the engine's
   `pulumi preview` of the same change (one more worker), on the deployed stack. No target.

Run from the project root once `invoke engine` installed the engine:
`python -m bench.engine [--hogs N]`; `--hogs 2` runs two busy loops beside it, the "loaded"
figure. It prints the timings and the ratios, and exits 1 when a ratio misses its target.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from ops.review.plan import collect_plan, plan_stack_isolated
from ops.review.plan_diff import diff_plans
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.identity import signed_in_user
from tests.support.engine_stack import PROJECT_ROOT, EngineWorkspace, installed_engine_bin

TARGETS = {"up": 1.5, "no-change up": 1.2}
REPO_STACK = "bench-engine"
"""The stack `invoke up` deploys: a stack file in the checkout's stacks/ while the bench runs."""

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


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """`count` CPU hogs beside the bench (`python -c 'while 1: pass'`), ended afterwards."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def timed_invoke(space: EngineWorkspace, *args: str) -> float:
    began = time.perf_counter()
    done = space.invoke(*args)
    if done.returncode != 0:
        raise SystemExit(f"invoke {' '.join(args)} failed:\n{done.stdout[-3000:]}"
                         f"{done.stderr[-3000:]}")
    return time.perf_counter() - began


def verdict(name: str, ratio: float) -> str:
    target = TARGETS[name]
    return f"{ratio:.2f} (target <= {target}: {'ok' if ratio <= target else 'OVER TARGET'})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine")
    parser.add_argument("--hogs", type=int, default=0,
                        help="CPU busy loops to run beside the bench (the loaded figure)")
    args = parser.parse_args(argv)
    bin_dir = installed_engine_bin()
    if bin_dir is None:
        print("the pulumi engine is not installed: run `invoke engine` first", file=sys.stderr)
        return 1
    base_cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
    edited = copy.deepcopy(base_cluster)
    worker = edited["available_node_types"]["ray_worker_small"]
    worker["min_workers"] = worker["max_workers"]
    with signed_in_user(), FakeComputeServer(Faults(operation_s=0.0)) as fake, \
            tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp, busy_loops(args.hogs):
        space = EngineWorkspace(fake, bin_dir, root=Path(tmp) / "engine",
                                extra_env={"RAY_GCP_STATE_DIR": str(Path(tmp) / "state")})
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

        with space.repo_stack(REPO_STACK, {"ray-gcp:cluster": "stacks/clusters/full.yaml"}):
            timed_invoke(space, "up", "-s", REPO_STACK)  # deployed
            same_floor = space.run("minimal-program", "up", program=program)
            same_ours = timed_invoke(space, "up", "-s", REPO_STACK)
            timed_invoke(space, "down", "-s", REPO_STACK, "-y")
        space.run("minimal-program", "destroy", program=program)

    load = f" beside {args.hogs} busy loops" if args.hogs else ""
    print(f"pulumi up of full ({count} custom resources): {ours.seconds:.1f} s{load}")
    print(f"pulumi up of a minimal program with {count} resources: {floor.seconds:.1f} s")
    print(f"no-change invoke up of full: {same_ours:.1f} s")
    print(f"no-change pulumi up of the minimal program: {same_floor.seconds:.1f} s")
    print(f"invoke diff (two offline plans + diff, {len(rows)} rows): {offline_s:.1f} s")
    print(f"pulumi preview of the same change: {preview.seconds:.1f} s")
    up_ratio, same_ratio = ours.seconds / floor.seconds, same_ours / same_floor.seconds
    print(f"ratio up full:minimal = {verdict('up', up_ratio)}")
    print(f"ratio no-change invoke up:no-change pulumi up minimal = "
          f"{verdict('no-change up', same_ratio)}")
    print(f"ratio invoke diff:pulumi preview = {offline_s / preview.seconds:.2f}")
    return int(up_ratio > TARGETS["up"] or same_ratio > TARGETS["no-change up"])


if __name__ == "__main__":
    sys.exit(main())
