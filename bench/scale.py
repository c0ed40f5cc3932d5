"""Ratio benchmark: time to create 100 workers / time to create 1, ours vs Ray's launcher way.

Against the fake Compute API with a fixed 50 ms per call and 1 s per operation. Ours: one
bulkInsert, operations waited on together. Baseline (Ray's launcher): one `insert` per instance
in sequence, then one wait per operation in sequence, through the same client library.

Run from the project root: `python -m bench.scale`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from infra.workers import Deadlines, WorkerGroupProvider
from infra.workers.clients import ApiClients, build_credentials
from infra.workers.naming import new_node_name
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.helpers import PROJECT, ZONE, compute_body, group_props
from tests.fakes.compute.identity import signed_in_user


def ours(server: FakeComputeServer, count: int, run: str) -> None:
    props = group_props(server.endpoint, count, name_prefix=f"ray-bench-{run}")
    WorkerGroupProvider(deadlines=Deadlines(compute_s=120)).create(props)


def ray_launcher_way(server: FakeComputeServer, count: int, run: str) -> None:
    clients = ApiClients(build_credentials(None, server.endpoint), server.endpoint)
    body = compute_body()
    operations = []
    for _ in range(count):
        name = new_node_name(f"ray-base-{run}")
        operations.append(clients.compute.call(
            "instances.insert", {**body, "name": name}, project=PROJECT, zone=ZONE)["name"])
    for operation in operations:
        clients.compute.call("zoneOperations.wait", project=PROJECT, zone=ZONE,
                             operation=operation)


def measure(server: FakeComputeServer, create: Callable[[FakeComputeServer, int, str], Any],
            count: int, run: str) -> tuple[float, int]:
    calls_before = sum(server.cloud.calls.values())
    started = time.perf_counter()
    create(server, count, run)
    elapsed = time.perf_counter() - started
    return elapsed, sum(server.cloud.calls.values()) - calls_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per API call")
    parser.add_argument("--operation", type=float, default=1.0, help="seconds per operation")
    args = parser.parse_args()
    faults = Faults(latency_s=args.latency, operation_s=args.operation)
    with signed_in_user(), FakeComputeServer(faults, wait_max_s=120) as server:
        results = {}
        for label, create in (("ours", ours), ("baseline", ray_launcher_way)):
            one, _ = measure(server, create, 1, f"{label[:4]}1")
            many, calls = measure(server, create, args.workers, f"{label[:4]}n")
            results[label] = (one, many, calls)
    n = args.workers
    for label, (one, many, calls) in results.items():
        print(f"{label:9} create 1: {one:6.2f} s  create {n}: {many:6.2f} s  "
              f"API calls per worker: {calls / n:.2f}")
    ours_ratio = results["ours"][1] / results["ours"][0]
    base_ratio = results["baseline"][1] / results["baseline"][0]
    print(f"ratio {n}:1 = {ours_ratio:.2f}   (baseline, Ray's launcher way: {base_ratio:.2f};"
          " target below 1.5)")


if __name__ == "__main__":
    main()
