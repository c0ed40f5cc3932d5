"""A worker created on-demand in a spot type's fallback tells Ray so: the group's startup script
is the same for every node, and each node's `ray start` gets `RAY_NODE_MARKET_TYPE` (label
`ray.io/market-type`) from its own instance's scheduling as GCE's metadata server serves it. So
the market Ray sees matches the `ray-capacity` label the group gave the instance."""

from __future__ import annotations

from typing import Any

from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import CLUSTER, PROJECT, fast_provider, group_props
from tests.support.bootstrap_stubs import cluster, node_entries, run_script

ZONES = ["us-west1-a", "us-west1-b"]


def serve_scheduling(where, instance: dict[str, Any]) -> None:
    """What the metadata server answers under instance/scheduling/ for this instance: the
    provisioning model as the API's enum name, preemptible as TRUE or FALSE."""
    scheduling = instance.get("scheduling") or {}
    served = {
        "instance/zone": f"projects/123456789/zones/{ZONES[0]}",
        "instance/name": instance["name"],
        "instance/scheduling/preemptible": "TRUE" if scheduling.get("preemptible") else "FALSE",
        "instance/scheduling/provisioning-model": scheduling.get("provisioningModel", "STANDARD"),
    }
    for path, value in served.items():
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).write_text(value)


def test_each_worker_reports_the_market_its_instance_got(tmp_path):
    with FakeComputeServer() as fake:
        fake.cloud.catalogue.zones["us-west1"] = list(ZONES)
        fake.faults.spot_capacity.update({ZONES[0]: 1, ZONES[1]: 0})
        fast_provider().create(group_props(
            fake.endpoint, 2, capacity={"fallback": "on-demand", "return_to_spot": False}))
        instances = {}
        for zone in ZONES:
            instances.update(fake.instances(PROJECT, zone, **{"ray-cluster-name": CLUSTER}))

    assert sorted(i["labels"]["ray-capacity"] for i in instances.values()) == [
        "on-demand", "spot"]
    for name, instance in instances.items():
        where = tmp_path / name
        where.mkdir()
        serve_scheduling(where, instance)
        entries = node_entries(cluster(), "worker", "worker_t", where)
        run = run_script(entries.pop("startup-script"), where,
                         {**entries, "ray-head-address": "10.0.0.9"})
        assert run.returncode == 0, run.log
        assert run.ray_env["RAY_NODE_MARKET_TYPE"] == instance["labels"]["ray-capacity"], name
