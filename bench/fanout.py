"""Bench: `invoke exec --all-nodes true` and `invoke rsync-up --all-nodes` to 100 nodes against
one node (issue 42: 100 nodes <= 3x one node).

The nodes are real OpenSSH sshds on this machine, each listening on up to 16 loopback
addresses (tests/support/sshd_fleet.py): the head at 127.0.0.1, the workers at 127.0.0.2 on,
reached through the head as a jump host as on GCE. Their sessions get `ray` on the PATH and an
empty home, so a node's shell does only what the command asks. Both sides are cold
(`RAY_GCP_SSH_PERSIST=0`: no warm connection, no kept master), the default `--parallel`.
Run from the project root: `python -m bench.fanout [--workers 99] [--runs 3]`.

Reported, as medians of interleaved rounds: each command's wall time with one node and with
all of them and their ratio, and the CPU seconds spent here (the task and its ssh processes)
and by the sshds: on one machine the nodes' side of every handshake runs on the same cores
as ours, which a real cluster spreads over its nodes. Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PROJECT_ROOT)]

from tests.support.sshd_fleet import fleet_outputs, pin_fleet, sshd_fleet  # noqa: E402
from tests.support.sshd_server import LocalSshd  # noqa: E402

TARGET = 3.0
STACK = "fanout"


def sshd_cpu(servers: list[LocalSshd]) -> float:
    """CPU seconds of the sshds' finished children (one per connection), so far."""
    ticks = 0
    for server in servers:
        fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=99, help="workers besides the head")
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        home = workdir / "home"
        home.mkdir()
        settings = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
        source = workdir / "src"
        source.mkdir()
        for number in range(20):
            (source / f"module_{number}.py").write_text(f"VALUE = {number}\n" * 50)
        with sshd_fleet(LocalSshd, workdir, options.workers, settings) as servers:
            envs = {}
            for label, workers in (("1 node", 0), (f"{options.workers + 1} nodes",
                                                    options.workers)):
                outputs = workdir / f"outputs-{workers}.json"
                outputs.write_text(json.dumps(fleet_outputs(servers, workers)))
                state = workdir / f"state-{workers}"
                pin_fleet(state, STACK, servers)
                envs[label] = {**os.environ, "RAY_GCP_STACK_OUTPUTS": str(outputs),
                               "RAY_GCP_STATE_DIR": str(state), "PULUMI_STACK": STACK,
                               "RAY_GCP_SSH_PERSIST": "0"}
            invoke = [sys.executable, "-m", "invoke"]
            commands = {"exec": [*invoke, "exec", "--all-nodes", "true"],
                        "rsync-up": [*invoke, "rsync-up", "--all-nodes", str(source)]}
            wall: dict[tuple[str, str], list[float]] = {}
            cpu: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for round_number in range(options.runs + 1):  # the first warms the disk caches
                for name, argv in commands.items():
                    for index, (label, env) in enumerate(envs.items()):
                        if name == "rsync-up":  # a new folder: each run sends
                            argv = [*commands[name],
                                    str(workdir / f"dst-{round_number}-{index}")]
                        ours, theirs = own_cpu(), sshd_cpu(servers)
                        start = time.perf_counter()
                        run = subprocess.run(argv, env=env, cwd=PROJECT_ROOT,
                                             capture_output=True, text=True)
                        seconds = time.perf_counter() - start
                        if run.returncode != 0:
                            raise SystemExit(f"{name} to {label} failed ({run.returncode}): "
                                             f"{run.stderr[-2000:]}")
                        if round_number:
                            wall.setdefault((name, label), []).append(seconds)
                            cpu.setdefault((name, label), []).append(
                                (own_cpu() - ours, sshd_cpu(servers) - theirs))
    ok = True
    labels = list(envs)
    for name in commands:
        one, many = (statistics.median(wall[(name, label)]) for label in labels)
        ratio = one and many / one
        ok &= ratio <= TARGET
        here, nodes = (statistics.median(part) for part in zip(*cpu[(name, labels[1])],
                                                                  strict=True))
        print(f"{name} --all-nodes: {labels[1]} {many:6.2f} s, {labels[0]} {one:6.2f} s, "
              f"ratio {labels[1].split()[0]}:1 = {ratio:.2f} (target <= {TARGET}: "
              f"{'ok' if ratio <= TARGET else 'OVER TARGET'}); CPU with {labels[1]}: here "
              f"{here:.2f} s, the sshds (the nodes' side) {nodes:.2f} s")
    print(f"(one machine, {os.cpu_count()} cores, load average "
          f"{', '.join(f'{load:.1f}' for load in os.getloadavg())}; medians of {options.runs})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
