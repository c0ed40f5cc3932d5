"""Wall time of `invoke status` against the fake Compute API, as a ratio to a baseline commit's.

The stack's head is stopped (TERMINATED, with autostop's labels) and its SSH port closed, so a
run asks the API everything `status` asks: the autoscaled workers, the preemptions, the spend
lines, then the stopped-head note. Each round runs `python -m invoke status` (a new process, as
a user types it) once from this tree and once from `--baseline` (that commit, extracted with
`git archive` into a temporary folder, run with this environment), the order alternating,
after one untimed run of each that writes its bytecode (`invoke --write-pyc`: invoke writes none
by default, and a baseline from before tasks.py turned it back on would not either) into a
scratch folder (PYTHONPYCACHEPREFIX), so no timed run pays for compiling the
client libraries. Prints each side's median, the API calls its last run made and over how many
connections (one per client it built), and the ratio.

Run from the project root: `python -m bench.status [--baseline REF] [--rounds N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO, StringIO
from pathlib import Path

import paramiko

from bootstrap.local_cluster import free_port
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.identity import signed_in_user

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROJECT, ZONE, HEAD = "bench-project", "us-west1-a", "ray-bench-head"
AUTOSTOPPED = {"ray-cluster-name": "bench", "ray-autostop": "stopped",
               "ray-autostop-at": "2026-12-05t01-02-03z"}
STOPPED_NOTE = "the cluster was stopped for idleness"


def outputs() -> dict[str, object]:
    """A stack whose head nothing answers for on SSH (a port no one listens on)."""
    key = StringIO()
    paramiko.ECDSAKey.generate().write_private_key(key)
    return {
        "cluster_name": "bench", "project": PROJECT, "zone": ZONE, "head_name": HEAD,
        "head_internal_ip": "127.0.0.1", "head_external_ip": "127.0.0.1",
        "ssh_user": "ubuntu", "ssh_private_key": key.getvalue(), "ssh_port": free_port(),
        "nodes": [{"name": HEAD, "node_type": "ray_head_default", "kind": "head",
                   "internal_ip": "127.0.0.1", "external_ip": "127.0.0.1",
                   "status": "RUNNING"}],
    }


def extract(ref: str, into: Path) -> Path:
    """The project at `ref`, as files (nothing in the repository changes)."""
    archive = subprocess.run(["git", "archive", "--format=tar", ref], cwd=PROJECT_ROOT,
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_status(tree: Path, env: dict[str, str], *invoke_flags: str) -> float:
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "invoke", *invoke_flags, "status"], cwd=tree,
                         env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - started
    if run.returncode != 0 or STOPPED_NOTE not in run.stdout:
        raise SystemExit(f"`invoke status` in {tree} did not explain the stopped head:\n"
                         f"{run.stdout}{run.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="main", help="commit to compare with")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per API call")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, signed_in_user(), \
            FakeComputeServer(Faults(latency_s=args.latency)) as server:
        work = Path(scratch)
        server.cloud.add_foreign_instance(PROJECT, ZONE, HEAD, AUTOSTOPPED)
        with server.cloud.lock:
            server.cloud.zone_instances(PROJECT, ZONE)[HEAD]["status"] = "TERMINATED"
        (work / "outputs.json").write_text(json.dumps(outputs()))
        user_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env = {**user_env, "PYTHONPYCACHEPREFIX": str(work / "pycache"),
               "RAY_GCP_STACK_OUTPUTS": str(work / "outputs.json"),
               "RAY_GCP_STATE_DIR": str(work / "state"), "PULUMI_STACK": "bench",
               "RAY_GCP_SSH_PERSIST": "0", "RAY_GCP_API_ENDPOINT": server.endpoint}
        trees = {"this tree": PROJECT_ROOT,
                 f"baseline {args.baseline}": extract(args.baseline, work / "baseline")}
        for tree in trees.values():
            run_status(tree, env, "--write-pyc")
        times: dict[str, list[float]] = {label: [] for label in trees}
        served: dict[str, tuple[int, int]] = {}
        for round_number in range(args.rounds):
            order = list(trees) if round_number % 2 == 0 else list(reversed(trees))
            for label in order:
                start = len(server.served)
                times[label].append(run_status(trees[label], env))
                requests = server.served[start:]
                served[label] = (len(requests), len({r.connection for r in requests}))
    medians = {label: statistics.median(values) for label, values in times.items()}
    for label, median in medians.items():
        calls, connections = served[label]
        print(f"{label:24} median {median:6.3f} s of {args.rounds}  "
              f"(min {min(times[label]):.3f}, max {max(times[label]):.3f}); "
              f"{calls} API calls over {connections} connections")
    ours, baseline = medians.values()
    print(f"ratio this:baseline = {ours / baseline:.3f}")


if __name__ == "__main__":
    main()
