"""Time-to-ready of `invoke local-up` (rendered startup scripts) against bare `ray start`.

Both sides start a head then a worker on this machine with their own RAY_TMPDIR and free
ports, and are ready when `ray status` lists two active nodes. Rounds alternate the order so
a warm cache favours neither. Prints each time and the ratio (target: below 1.2).

    python bench/local_up.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bootstrap.local_cluster import (  # noqa: E402
    DEFAULT_CONFIG,
    LocalCluster,
    local_up,
)
from bootstrap.local_processes import become_subreaper  # noqa: E402
from model.config import load_cluster_config  # noqa: E402


def _quiet(_: str) -> None:
    pass


def time_local_up() -> float:
    config = load_cluster_config(DEFAULT_CONFIG)
    started = time.monotonic()
    cluster = local_up(config, _quiet)
    elapsed = time.monotonic() - started
    cluster.down()
    return elapsed


def time_bare_ray_start() -> float:
    cluster = LocalCluster.create()
    env = cluster.ray_env()
    try:
        started = time.monotonic()
        subprocess.run(
            ["ray", "start", "--head", f"--port={cluster.gcs_port}",
             f"--dashboard-port={cluster.dashboard_port}",
             f"--ray-client-server-port={cluster.client_port}", "--include-dashboard=false",
             "--disable-usage-stats", "--num-cpus=1"],
            env=env, check=True, capture_output=True,
        )
        subprocess.run(
            ["ray", "start", f"--address={cluster.address}", "--disable-usage-stats",
             "--num-cpus=1"],
            env=env, check=True, capture_output=True,
        )
        cluster.wait_for_nodes(2, _quiet)
        return time.monotonic() - started
    finally:
        cluster.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    rounds = parser.parse_args().rounds
    become_subreaper()
    scripted, bare = [], []
    for round_number in range(rounds):
        pair = [(scripted, time_local_up), (bare, time_bare_ray_start)]
        for times, measure in pair if round_number % 2 == 0 else reversed(pair):
            times.append(measure())
        print(f"round {round_number + 1}: local-up {scripted[-1]:.1f}s, "
              f"bare ray start {bare[-1]:.1f}s", flush=True)
    ratio = statistics.median(scripted) / statistics.median(bare)
    print(f"median local-up {statistics.median(scripted):.1f}s, "
          f"bare {statistics.median(bare):.1f}s, ratio {ratio:.2f} (target < 1.2)")


if __name__ == "__main__":
    main()
