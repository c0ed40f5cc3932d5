"""Wall time of `invoke plan` against the floor of importing pulumi and pulumi_gcp.

Run: `python bench/plan.py [--repeat N]`. Measures, in this run and on this machine, the best
of N wall times (and the CPU time of that run) of: `python -c 'import pulumi, pulumi_gcp'`
(the floor), `invoke plan` of the `full` stack, and `invoke plan` of a generated stack with 50
worker node types. Prints each plan's ratio to the floor (targets: full below 1.5, 50 types
below 3). The head's autoscaler config carries every type's worker body in one GCE metadata
value (256 KB), so the program refuses a cluster of 50 types: the generated stack has as many
as it accepts (the line says how many).

pulumi_gcp loads its submodules lazily, so the floor does not include `pulumi_gcp.compute`,
whose `__init__` imports every compute resource module and which any program creating an
Instance pays for. The second reference, "program floor", also loads the pulumi_gcp classes
the program uses: the part of a plan above it is what this project's own code costs. CPU
times are printed because wall times on a shared machine swing with its load.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[1]
FLOOR = [sys.executable, "-c", "import pulumi, pulumi_gcp"]
# The pulumi_gcp classes the program touches (infra/), each loading its whole submodule.
PROGRAM_FLOOR = [sys.executable, "-c", "import pulumi, pulumi_gcp as gcp; "
                 "gcp.compute.Instance, gcp.tpu.V2Vm, gcp.serviceaccount.Account, "
                 "gcp.projects.IAMMember, gcp.secretmanager.Secret"]
TARGETS = {"full": 1.5, "generated": 3.0}
ASKED_NODE_TYPES = 50


def generated_cluster(node_types: int) -> dict:
    """full.yaml with `node_types` worker types of one node each."""
    cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
    template = cluster["available_node_types"]["ray_worker_small"]
    cluster["available_node_types"] = {
        cluster["head_node_type"]: cluster["available_node_types"][cluster["head_node_type"]],
        **{f"worker_{i:02d}": {**template, "min_workers": 1, "max_workers": 1}
           for i in range(node_types)},
    }
    cluster["max_workers"] = node_types
    return cluster


def accepted(node_types: int) -> bool:
    """Whether the program accepts the generated cluster (GCE's metadata limits)."""
    sys.path.insert(0, str(PROJECT_ROOT))
    from infra.config import ConfigError, parse_cluster_config
    from infra.metadata_limits import check_metadata_limits
    from infra.plan import plan_cluster

    try:
        check_metadata_limits(plan_cluster(parse_cluster_config(generated_cluster(node_types))))
    except ConfigError:
        return False
    return True


def most_node_types(asked: int) -> int:
    """The largest count up to `asked` that the program accepts (it shrinks monotonically)."""
    low, high = 1, asked
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if accepted(middle) else (low, middle - 1)
    return low


def write_generated_stack(root: Path, node_types: int) -> None:
    (root / "stacks/clusters").mkdir(parents=True)
    (root / "stacks/clusters/generated.yaml").write_text(
        yaml.safe_dump(generated_cluster(node_types)))
    (root / "stacks/Pulumi.generated.yaml").write_text(
        yaml.safe_dump({"config": {"ray-gcp:cluster": "stacks/clusters/generated.yaml"}}))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def best_time(command: list[str], repeat: int) -> tuple[float, float]:
    """(best wall time, CPU time of that same run) over `repeat` runs."""
    runs = []
    for _ in range(repeat):
        cpu, start = _children_cpu(), time.perf_counter()
        subprocess.run(command, cwd=PROJECT_ROOT, check=True, stdout=subprocess.DEVNULL)
        runs.append((time.perf_counter() - start, _children_cpu() - cpu))
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    invoke = [sys.executable, "-m", "invoke", "plan", "--out", "/dev/null"]
    node_types = most_node_types(ASKED_NODE_TYPES)
    with tempfile.TemporaryDirectory() as tmp:
        write_generated_stack(Path(tmp), node_types)
        floor = best_time(FLOOR, args.repeat)
        program_floor = best_time(PROGRAM_FLOOR, args.repeat)
        timings = {
            "full": best_time([*invoke, "--stack", "full"], args.repeat),
            "generated": best_time(
                [*invoke, "--stack", "generated", "--root", tmp], args.repeat),
        }
    print(f"floor (import pulumi, pulumi_gcp): {floor[0]:.2f} s (cpu {floor[1]:.2f} s)")
    print(f"program floor (+ the pulumi_gcp classes used): {program_floor[0]:.2f} s "
          f"(cpu {program_floor[1]:.2f} s)")
    labels = {"full": "full", "generated": f"generated-{node_types} "
              f"({ASKED_NODE_TYPES} asked; GCE metadata caps it at {node_types} types)"}
    for name, (seconds, cpu) in timings.items():
        ratio = seconds / floor[0]
        verdict = "ok" if ratio < TARGETS[name] else "over target"
        print(f"invoke plan {labels[name]}: {seconds:.2f} s (cpu {cpu:.2f} s), ratio {ratio:.2f} "
              f"(target < {TARGETS[name]}: {verdict}); cpu ratio {cpu / floor[1]:.2f}; "
              f"above the program floor {seconds - program_floor[0]:.2f} s "
              f"(cpu {cpu - program_floor[1]:.2f} s)")


if __name__ == "__main__":
    main()
