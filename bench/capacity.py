"""Ratio benchmark: 32 workers when the cluster's zone is stocked out, as a ratio to 32 workers in
a healthy zone; and what Ray's launcher way (retry the same zone) gets meanwhile.

Against the fake Compute API, region us-west1 with zones a, b, c, fixed latencies: 50 ms per
call, 2 s per create operation, 0.5 s for an operation GCE refuses for capacity (both about a
tenth of what GCE takes: ~20 s to create, a stockout reported within seconds). Ours: one
WorkerGroup create, which finds us-west1-a exhausted and puts the workers in the next zone that
offers the type. Baseline (Ray's launcher): one `insert` per node in the configured zone,
operations polled, and on failure the same again at the autoscaler's next update, for as many
rounds as fit in the time our failover took, times three.

The ladder case (issue 37): 32 GPU workers down the ladder reservation -> spot -> flex-start
-> on-demand, the reservation holding 8 and spot stocked out in us-west1-a and -b (spot is left
in -c), against the same ladder with spot everywhere: time to all 32 (target <= 1.5x) and API
calls per node (target <= 2x).

Run from the project root: `python -m bench.capacity`. Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from infra.workers import Deadlines, WorkerGroupProvider
from infra.workers.clients import ApiClients, build_credentials
from infra.workers.naming import new_node_name
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.helpers import PROJECT, ZONE, compute_body, gpu_body, group_props
from tests.fakes.compute.identity import signed_in_user

ZONES = ["us-west1-a", "us-west1-b", "us-west1-c"]
TARGET = 1.5
CALLS_TARGET = 2.0
RESERVED = 8
UPDATE_INTERVAL_S = 0.5  # Ray's autoscaler updates every 5 s; scaled like the operations


def ours(server: FakeComputeServer, count: int, run: str) -> float:
    """Seconds until `count` workers exist (the create returns once they are RUNNING)."""
    props = group_props(server.endpoint, count, name_prefix=f"ray-bench-{run}")
    started = time.perf_counter()
    outs = WorkerGroupProvider(deadlines=Deadlines(compute_s=120)).create(props).outs
    elapsed = time.perf_counter() - started
    if outs["count"] != count:
        raise SystemExit(f"{run}: {outs['count']} of {count} workers")
    return elapsed


def ladder(server: FakeComputeServer, count: int, run: str) -> tuple[float, float]:
    """(seconds until `count` GPU workers exist down the ladder, API calls per node); the
    run's own reservation holds RESERVED of them."""
    reservation = f"gpu-res-{run}"
    server.cloud.reservations.add(PROJECT, ZONE, reservation, RESERVED, "n1-standard-2",
                                  accelerators=[{"acceleratorType": "nvidia-tesla-t4",
                                                 "acceleratorCount": 1}])
    policy = {"ladder": [{"market": "reservation", "reservations": [reservation]},
                         {"market": "spot"}, {"market": "flex-start"},
                         {"market": "on-demand"}]}
    props = group_props(server.endpoint, count, name_prefix=f"ray-bench-{run}",
                        body=gpu_body(1), capacity=policy)
    calls = sum(server.cloud.calls.values())
    started = time.perf_counter()
    outs = WorkerGroupProvider(deadlines=Deadlines(compute_s=120)).create(props).outs
    elapsed = time.perf_counter() - started
    if outs["count"] != count:
        raise SystemExit(f"{run}: {outs['count']} of {count} workers")
    return elapsed, (sum(server.cloud.calls.values()) - calls) / count


def ladder_case(faults: Faults, server: FakeComputeServer, count: int, repeats: int
                ) -> tuple[float, float, float, float]:
    """Medians: (healthy s, stocked-out s, healthy calls/node, stocked-out calls/node)."""
    healthy, stocked = [], []
    for repeat in range(repeats):
        faults.spot_capacity.clear()
        healthy.append(ladder(server, count, f"lh{repeat}"))
        faults.spot_capacity.update({ZONES[0]: 0, ZONES[1]: 0})
        stocked.append(ladder(server, count, f"ls{repeat}"))
    faults.spot_capacity.clear()
    return (statistics.median(t for t, _ in healthy), statistics.median(t for t, _ in stocked),
            statistics.median(c for _, c in healthy), statistics.median(c for _, c in stocked))


def ray_launcher_way(server: FakeComputeServer, count: int, budget_s: float) -> tuple[int, int]:
    """(nodes created, rounds tried): Ray's GCP provider inserts each node in its one zone
    and raises on the first failed operation; the autoscaler tries again next update."""
    clients = ApiClients(build_credentials(None, server.endpoint), server.endpoint)
    body = compute_body()
    created, rounds = 0, 0
    give_up_at = time.perf_counter() + budget_s
    while time.perf_counter() < give_up_at and created < count:
        rounds += 1
        operations = []
        for _ in range(count - created):
            name = new_node_name("ray-base")
            operations.append(clients.compute.call(
                "instances.insert", {**body, "name": name}, project=PROJECT, zone=ZONE)["name"])
        for operation in operations:
            done = clients.compute.call("zoneOperations.wait", project=PROJECT, zone=ZONE,
                                        operation=operation)
            if (done.get("error") or {}).get("errors"):
                break  # Ray: `raise Exception(result["error"])`, the launch fails
            created += 1
        time.sleep(UPDATE_INTERVAL_S)
    return created, rounds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per API call")
    parser.add_argument("--operation", type=float, default=2.0, help="seconds per create")
    parser.add_argument("--refused", type=float, default=0.5,
                        help="seconds until a stocked-out create fails")
    args = parser.parse_args()
    faults = Faults(latency_s=args.latency, operation_s=args.operation,
                    refused_operation_s=args.refused)
    healthy, failover = [], []
    with signed_in_user(), FakeComputeServer(faults, wait_max_s=120) as server:
        server.cloud.catalogue.zones["us-west1"] = list(ZONES)
        for repeat in range(args.repeats):
            faults.zone_capacity.pop(ZONE, None)
            healthy.append(ours(server, args.workers, f"h{repeat}"))
            faults.zone_capacity[ZONE] = 0
            failover.append(ours(server, args.workers, f"f{repeat}"))
        in_zone = {z: len(server.instances(PROJECT, z)) for z in ZONES}
        budget = 3 * statistics.median(failover)
        got, rounds = ray_launcher_way(server, args.workers, budget)
        faults.zone_capacity.pop(ZONE, None)
        ladder_s, ladder_out_s, calls, calls_out = ladder_case(faults, server, args.workers,
                                                               args.repeats)
    n = args.workers
    ratio = statistics.median(failover) / statistics.median(healthy)
    print(f"{n} workers, {args.latency * 1000:.0f} ms per call, {args.operation:g} s per create, "
          f"{args.refused:g} s per refused create; median of {args.repeats}")
    print(f"{'healthy zone:':22}{statistics.median(healthy):6.2f} s")
    print(f"{ZONE + ' exhausted:':22}{statistics.median(failover):6.2f} s  (instances per zone: "
          f"{in_zone})")
    print(f"baseline, Ray's launcher way (retry {ZONE}): {got} of {n} nodes after {rounds} "
          f"rounds in {budget:.1f} s")
    print(f"ratio failover:healthy = {ratio:.2f}   (target below {TARGET})")
    ladder_ratio, calls_ratio = ladder_out_s / ladder_s, calls_out / calls
    print(f"ladder, {RESERVED} reserved + spot: {ladder_s:6.2f} s, {calls:.1f} calls per node; "
          f"spot stocked out in {ZONES[0]} and {ZONES[1]}: {ladder_out_s:6.2f} s, "
          f"{calls_out:.1f} calls per node")
    print(f"ratio ladder stocked-out:healthy = {ladder_ratio:.2f}   (target at most {TARGET}); "
          f"calls per node {calls_ratio:.2f}x   (target at most {CALLS_TARGET:g}x)")
    return 0 if ratio < TARGET and ladder_ratio <= TARGET and calls_ratio <= CALLS_TARGET \
        else 1


if __name__ == "__main__":
    sys.exit(main())
