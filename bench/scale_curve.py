"""The cost curve from 1 to 1,000 pinned workers, against a fake cloud that answers like
Google's (tests/fakes/compute/google_profile.py: its latency, operation times, per-minute quotas
and list pages), through the real pulumi engine with the stand-in gcp plugin (as bench/engine.py
drives it).

For each size (workers of one type, min_workers = max_workers) and for a cluster of 50 worker
types: `up` (the program through the engine, as `invoke up` runs it), `invoke status` (a new
process, as a user types it), `scale` +50% and -50% (the YAML's counts changed, then `up`),
and `down` (`pulumi destroy`). Each phase is timed on the wall clock and printed as a ratio to
the same phase of the 10-node cluster (same fake latency), with the API calls it made per node,
the largest process's peak memory (ru_maxrss of the engine, its plugins and the status
process) and the state file's size after `up`. `status`'s own time is its process's CPU time
(the fake's latency is not ours). Writes a PNG chart (matplotlib) of the ratios.

Each size runs in its own process (its peak memory is its own), with its own fake.
Run from the project root once `invoke engine` installed the engine:
`python -m bench.scale_curve [--sizes 1,10,100,1000] [--types 50] [--chart PATH]`;
`--quick` is the suite's smoke run (tests/project/test_bench_runs.py). Exit 1 when a target is
missed.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PHASES = ("up", "status", "scale+50%", "scale-50%", "down")
TARGET_RATIO = 3.0  # up and down at 1,000 nodes against 10 (issue 42)
STATUS_OWN_S = 2.0
STATE_BYTES = 1_000_000
WORKER = {
    "resources": {"CPU": 2},
    "node_config": {
        "machineType": "n1-standard-2",
        "disks": [{"boot": True, "autoDelete": True, "type": "PERSISTENT",
                   "initializeParams": {"diskSizeGb": 50, "sourceImage":
                                        "projects/deeplearning-platform-release/global/"
                                        "images/family/common-cpu"}}],
        "scheduling": [{"preemptible": True}],
    },
}


def cluster(nodes: int, types: int) -> dict[str, Any]:
    """The minimal stack's cluster with `nodes` pinned workers spread over `types` types."""
    base = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/minimal.yaml").read_text())
    head = copy.deepcopy(WORKER)
    base["cluster_name"] = "curve"
    base["head_node_type"] = "head"
    base["available_node_types"] = {"head": {**head, "resources": {"CPU": 0}}}
    for index in range(types):
        count = nodes // types + (1 if index < nodes % types else 0)
        base["available_node_types"][f"worker_{index}"] = {
            **copy.deepcopy(WORKER), "min_workers": count, "max_workers": count}
    base["max_workers"] = nodes
    return base


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_size(nodes: int, types: int, latency: float, operation: float) -> dict[str, Any]:
    """Every phase on one size, in this process: {phase: {seconds, calls}}, peak memory,
    state size."""
    from tests.fakes.compute import FakeComputeServer
    from tests.fakes.compute.google_profile import GOOGLE
    from tests.fakes.compute.identity import signed_in_user
    from tests.support.engine_stack import EngineWorkspace, installed_engine_bin

    bin_dir = installed_engine_bin()
    if bin_dir is None:
        raise SystemExit("the pulumi engine is not installed: run `invoke engine` first")
    profile = GOOGLE.scaled(latency_s=latency, operation_s=operation)
    phases: dict[str, dict[str, float]] = {}
    with signed_in_user(), FakeComputeServer(profile=profile) as fake, \
            tempfile.TemporaryDirectory(prefix="bench-curve-") as tmp:
        space = EngineWorkspace(fake, bin_dir, root=Path(tmp) / "engine",
                                extra_env={"RAY_GCP_STATE_DIR": str(Path(tmp) / "state")})
        yaml_path = Path(tmp) / "curve.yaml"

        def up(count: int, phase: str) -> dict[str, Any]:
            yaml_path.write_text(yaml.safe_dump(cluster(count, types)))
            space.write_stack("curve", {"ray-gcp:cluster": str(yaml_path)})
            calls = len(fake.served)
            run = space.run("curve", "up")
            phases[phase] = {"seconds": run.seconds, "calls": len(fake.served) - calls}
            return run.outputs

        outputs = up(nodes, "up")
        state = next((Path(tmp) / "engine" / "state").rglob("curve.json"))
        state_bytes = state.stat().st_size
        phases["status"] = status(fake, outputs, Path(tmp))
        up(nodes + max(1, nodes // 2), "scale+50%")
        up(max(1, nodes - nodes // 2), "scale-50%")
        calls = len(fake.served)
        run = space.run("curve", "destroy")
        phases["down"] = {"seconds": run.seconds, "calls": len(fake.served) - calls}
        refused = sum(fake.limiter.refused.values()) if fake.limiter else 0
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"nodes": nodes, "types": types, "phases": phases, "peak_mb": peak_kb / 1024,
            "state_bytes": state_bytes, "rate_limited": refused}


def status(fake: Any, outputs: dict[str, Any], tmp: Path) -> dict[str, float]:
    """`invoke status` from the stack's outputs (its head's SSH port closed: the fake's nodes
    run nothing, so the table comes and then the one line saying the head cannot be reached);
    wall time, and the process's own CPU time."""
    import paramiko

    from bootstrap.local_cluster import free_port

    key = StringIO()
    paramiko.ECDSAKey.generate().write_private_key(key)
    plain = dict(outputs)  # the engine driver gives secrets as None: a key of our own
    plain.update({"head_external_ip": "127.0.0.1", "head_internal_ip": "127.0.0.1",
                  "ssh_port": free_port(), "ssh_private_key": key.getvalue()})
    (tmp / "outputs.json").write_text(json.dumps(plain))
    env = {**os.environ, "RAY_GCP_STACK_OUTPUTS": str(tmp / "outputs.json"),
           "RAY_GCP_STATE_DIR": str(tmp / "state"), "PULUMI_STACK": "curve",
           "RAY_GCP_SSH_PERSIST": "0", "RAY_GCP_API_ENDPOINT": fake.endpoint}
    calls, cpu = len(fake.served), children_cpu_s()
    began = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "invoke", "status"], cwd=PROJECT_ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - began
    # The fake's nodes run no sshd: the table comes, then `ray status` cannot be asked.
    unreachable = "cannot reach the head" in run.stdout + run.stderr
    if (run.returncode != 0 and not unreachable) or "Traceback" in run.stderr \
            or "NAME" not in run.stdout:
        raise SystemExit(f"`invoke status` failed:\n{run.stdout}{run.stderr}")
    return {"seconds": seconds, "calls": len(fake.served) - calls,
            "own_s": children_cpu_s() - cpu}


def measure(nodes: int, types: int, args: argparse.Namespace) -> dict[str, Any]:
    """One size in a fresh process (its peak memory its own); with `--results`, kept there
    as JSON and read back instead of measured again (a long curve resumes)."""
    kept = args.results / f"{nodes}-{types}.json" if args.results else None
    if kept is not None and kept.exists():
        return json.loads(kept.read_text())
    run = subprocess.run(
        [sys.executable, "-m", "bench.scale_curve", "--one", f"{nodes}:{types}",
         "--latency", str(args.latency), "--operation", str(args.operation)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=7200)
    if run.returncode != 0:
        raise SystemExit(f"{nodes} nodes ({types} types) failed:\n{run.stderr[-4000:]}")
    row = json.loads(run.stdout.strip().splitlines()[-1])
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(row))
    return row


def report(rows: list[dict[str, Any]], base: dict[str, Any]) -> list[str]:
    """The table, and the targets missed."""
    header = (f"{'nodes':>6} {'types':>5} " + " ".join(f"{p:>16}" for p in PHASES)
              + f" {'status own':>10} {'peak MB':>8} {'state KB':>9} {'429/403':>7}")
    print(header)
    for row in rows:
        cells = []
        for phase in PHASES:
            took = row["phases"][phase]
            ratio = took["seconds"] / base["phases"][phase]["seconds"]
            per_node = took["calls"] / max(1, row["nodes"])
            cells.append(f"{took['seconds']:6.1f}s {ratio:4.2f}x {per_node:4.1f}")
        print(f"{row['nodes']:>6} {row['types']:>5} " + " ".join(f"{c:>16}" for c in cells)
              + f" {row['phases']['status']['own_s']:>9.2f}s {row['peak_mb']:>8.0f}"
              f" {row['state_bytes'] / 1024:>9.0f} {row['rate_limited']:>7}")
    print("(each phase: seconds, ratio to the same phase at "
          f"{base['nodes']} nodes, API calls per node)")
    largest = max((r for r in rows if r["types"] == 1), key=lambda r: r["nodes"])
    missed = []
    for phase in ("up", "down"):
        ratio = largest["phases"][phase]["seconds"] / base["phases"][phase]["seconds"]
        print(f"ratio {phase} {largest['nodes']}:{base['nodes']} = {ratio:.2f} "
              f"(target <= {TARGET_RATIO})")
        if ratio > TARGET_RATIO:
            missed.append(f"{phase} at {largest['nodes']} nodes")
    own = largest["phases"]["status"]["own_s"]
    print(f"status own time at {largest['nodes']} nodes = {own:.2f} s (target < {STATUS_OWN_S})")
    if own >= STATUS_OWN_S:
        missed.append("status's own time")
    print(f"state at {largest['nodes']} nodes = {largest['state_bytes'] / 1e6:.2f} MB "
          f"(target < {STATE_BYTES / 1e6:.0f})")
    if largest["state_bytes"] >= STATE_BYTES:
        missed.append("state size")
    return missed


def chart(rows: list[dict[str, Any]], base: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    single = sorted((r for r in rows if r["types"] == 1), key=lambda r: r["nodes"])
    figure, axes = pyplot.subplots(figsize=(7, 4.2))
    for phase in PHASES:
        axes.plot([r["nodes"] for r in single],
                  [r["phases"][phase]["seconds"] / base["phases"][phase]["seconds"]
                   for r in single], marker="o", label=phase)
    axes.axhline(TARGET_RATIO, color="grey", linestyle="--", label="target (up, down)")
    axes.set_xscale("log")
    axes.set_xlabel("pinned worker nodes")
    axes.set_ylabel(f"time / time at {base['nodes']} nodes")
    axes.set_title("ray-gcp-pulumi against a Google-like fake Compute API")
    axes.legend(fontsize="small")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100,1000")
    parser.add_argument("--types", type=int, default=50, help="node types of the wide "
                        "cluster (one node each); 0: none")
    parser.add_argument("--latency", type=float, default=0.08, help="seconds per API call")
    parser.add_argument("--operation", type=float, default=3.0, help="seconds per operation")
    parser.add_argument("--chart", type=Path, default=None, help="PNG to write")
    parser.add_argument("--results", type=Path, default=None, help="folder keeping each "
                        "size's measures (a rerun measures only what is missing)")
    parser.add_argument("--quick", action="store_true", help="one size (2 workers), no "
                        "wide cluster, 10 ms calls: only that every phase runs")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        nodes, types = (int(part) for part in args.one.split(":"))
        print(json.dumps(run_size(nodes, types, args.latency, args.operation)))
        return 0
    if args.quick:
        args.sizes, args.types, args.latency, args.operation = "2", 0, 0.01, 0.2
    sizes = [int(size) for size in args.sizes.split(",")]
    rows = []
    for nodes in sizes:
        rows.append(measure(nodes, 1, args))
        print(f"measured {nodes} nodes", file=sys.stderr, flush=True)
    if args.types:
        rows.append(measure(args.types, args.types, args))
    base = next((r for r in rows if r["nodes"] == 10 and r["types"] == 1), rows[0])
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; fake: "
          f"{args.latency * 1000:.0f} ms a call, {args.operation:g} s an operation, Google's "
          "quotas")
    missed = report(rows, base)
    if args.chart:
        chart(rows, base, args.chart)
        print(f"chart: {args.chart}")
    if missed:
        print(f"missed: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
