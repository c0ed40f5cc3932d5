"""The small Ray program `local-up` runs: one task pinned to each alive node.

Run as `python -m bootstrap.local_program HOST:PORT`; prints one JSON object with each alive
node's resources and the node each pinned task actually ran on.
"""

from __future__ import annotations

import json
import sys

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=1)
def where_am_i() -> str:
    return ray.get_runtime_context().get_node_id()


def main(address: str) -> dict:
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        nodes = [node for node in ray.nodes() if node["Alive"]]
        pinned = {
            node["NodeID"]: where_am_i.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            ).remote()
            for node in nodes
        }
        ran_on = {node_id: ray.get(ref, timeout=120) for node_id, ref in pinned.items()}
        return {
            "nodes": [
                {"node_id": n["NodeID"], "resources": n["Resources"]} for n in nodes
            ],
            "task_ran_on": ran_on,
        }
    finally:
        ray.shutdown()


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
