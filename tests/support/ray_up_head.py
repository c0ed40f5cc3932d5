"""The head of a cluster `ray up` made, as its monitor runs: Ray's own autoscaler from the wheel
(v1 `StandardAutoscaler`, or v2 `Autoscaler`, which `ray up` starts by default since Ray 2.50:
`RAY_UP_enable_autoscaler_v2`), reading the config `ray up` put on the head
(`_set_up_config_for_head_node`: `~/ray_bootstrap_config.yaml`, Ray's key as
`~/ray_bootstrap_key.pem`), with Ray's `GCPNodeProvider` at the fake cloud as the head's service
account (`ray-autoscaler-sa-v1`, the account `bootstrap_gcp` gave it).

Nothing that decides is replaced. What stands in for the rest of the head: the raylets' reports
(every running instance reports its type's resources, as the node `ray start` made under
`RAY_CLOUD_INSTANCE_ID=<instance>`, `RAY_NODE_TYPE_NAME=<type>`, as Ray's updater and v2's
installer start it), the GCS's drain calls (a drained node's Ray exits), and v2's thread pools
(their work runs inline, so a cycle's launches are done when it returns).
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.fakes.compute import FakeComputeServer
from tests.support.engine_stack import cluster_nodes
from tests.support.ray_cooperation import InlineExecutor, requested_constraint
from tests.support.ray_cooperation import node_id as ray_node_id
from tests.support.ray_launcher import RayMade, point_ray_at, ray_provider

Version = Literal["v1", "v2"]
IDLE_FOR_AN_HOUR = 3600.0


@dataclass
class Raylets:
    """What the head's GCS knows of the cluster's Ray nodes, and the drains asked of it."""

    head_config: dict[str, Any]
    running: dict[str, dict[str, Any]] = field(default_factory=dict)
    drained: list[str] = field(default_factory=list)
    idle_s: dict[str, float] = field(default_factory=dict)
    busy: set[str] = field(default_factory=set)
    requested: list[dict[str, float]] = field(default_factory=list)

    def node_type(self, instance: dict[str, Any]) -> str:
        return instance["labels"].get("ray-user-node-type") or self.head_config["head_node_type"]

    def total(self, instance: dict[str, Any]) -> dict[str, float]:
        types = self.head_config["available_node_types"]
        return dict(types[self.node_type(instance)].get("resources") or {})

    @property
    def address(self) -> str:
        """The GCS's address: the head's, port 6379 as `ray up` starts it."""
        (head,) = [i for i in self.running.values() if i["labels"].get("ray-node-type") == "head"]
        return f"{head['networkInterfaces'][0]['networkIP']}:6379"

    def alive(self) -> dict[str, dict[str, Any]]:
        return {name: i for name, i in self.running.items() if name not in self.drained}

    # --- the GcsClient calls v2 makes

    def get_cluster_resource_state(self) -> bytes:
        from ray.core.generated.autoscaler_pb2 import (
            ClusterResourceState,
            GetClusterResourceStateReply,
            NodeState,
            NodeStatus,
        )

        version = int(time.monotonic() * 1000)
        state = ClusterResourceState(cluster_resource_state_version=version)
        for name, instance in self.running.items():
            total = self.total(instance)
            is_head = instance["labels"].get("ray-node-type") == "head"
            report = NodeState(
                node_id=ray_node_id(name), instance_id=name,
                ray_node_type_name=self.node_type(instance),
                node_ip_address=instance["networkInterfaces"][0]["networkIP"],
                total_resources={**total, **({"node:__internal_head__": 1.0} if is_head
                                             else {})},
                node_state_version=version)
            if name in self.drained:
                report.status = NodeStatus.DEAD
            else:
                report.available_resources.update({} if name in self.busy else total)
                idle = name not in self.busy
                report.status = NodeStatus.IDLE if idle else NodeStatus.RUNNING
                report.idle_duration_ms = int(self.idle_s.get(name, 0.0) * 1000) if idle else 0
            state.node_states.append(report)
        if self.requested:  # the GCS keeps the last request_resources as one constraint
            state.cluster_resource_constraints.append(requested_constraint(self.requested))
        return GetClusterResourceStateReply(cluster_resource_state=state).SerializeToString()

    def drain_node(self, node_id: str, reason: int, reason_message: str,
                   deadline_timestamp_ms: int) -> tuple[bool, str]:
        self.drained += [n for n in self.running if ray_node_id(n).hex() == node_id]
        return True, ""

    # --- the one call v1 makes

    def drain_nodes(self, node_ids: list[bytes], timeout: int | None = None) -> list[bytes]:
        self.drained += [n for n in self.running if ray_node_id(n) in node_ids]
        return list(node_ids)


class RayUpHead:
    """The monitor `ray up` started on the head, one `cycle` per monitor iteration."""

    def __init__(self, version: Version, made: RayMade, fake: FakeComputeServer, home: Path,
                 monkeypatch: pytest.MonkeyPatch) -> None:
        from ray.autoscaler._private.commands import _set_up_config_for_head_node

        self.made, self.fake, self.version = made, fake, version
        config = copy.deepcopy(made.config)
        config, remote_file = _set_up_config_for_head_node(config, ray_provider(config), False)
        with remote_file:
            self.config = json.loads(Path(remote_file.name).read_text())
        key = Path(made.config["auth"]["ssh_private_key"]).expanduser()
        (home / "ray_bootstrap_key.pem").write_text(key.read_text())
        config_file = home / "ray_bootstrap_config.yaml"
        config_file.write_text(json.dumps(self.config))
        monkeypatch.setenv("HOME", str(home))
        account = made.config["head_node"]["serviceAccounts"][0]
        point_ray_at(fake, monkeypatch, fake.vm_token(account["email"], account["scopes"]))
        self.raylets = Raylets(self.config)
        self.raylets.running = self.running()
        if version == "v1":
            from ray.autoscaler._private.autoscaler import StandardAutoscaler
            from ray.autoscaler._private.load_metrics import LoadMetrics

            self.load_metrics = LoadMetrics()
            self.v1 = StandardAutoscaler(str(config_file), self.load_metrics, self.raylets,
                                         update_interval_s=0)
        else:
            import ray.autoscaler.v2.instance_manager.node_provider as v2_node_provider
            import ray.autoscaler.v2.instance_manager.subscribers.ray_stopper as v2_ray_stopper
            from ray.autoscaler.v2.autoscaler import Autoscaler
            from ray.autoscaler.v2.instance_manager.config import FileConfigReader

            monkeypatch.setattr(v2_node_provider, "ThreadPoolExecutor", InlineExecutor)
            monkeypatch.setattr(v2_ray_stopper, "ThreadPoolExecutor", InlineExecutor)
            self.v2 = Autoscaler("session_ray_up", FileConfigReader(str(config_file)),
                                 self.raylets)

    def running(self) -> dict[str, dict[str, Any]]:
        project = self.config["provider"]["project_id"]
        zone = self.config["provider"]["availability_zone"]
        return {name: i for name, i in cluster_nodes(
            self.fake, project, zone, self.config["cluster_name"]).items()
            if i["status"] == "RUNNING"}

    def cycle(self, requested: list[dict[str, float]] | None = None,
              idle_s: dict[str, float] | None = None, busy: set[str] = frozenset()) -> None:
        """One monitor iteration: every running node's Ray reports (all in use on `busy`,
        idle for `idle_s[name]`), `request_resources` last asked for `requested`."""
        self.raylets.running = self.running()
        self.raylets.idle_s, self.raylets.busy = idle_s or {}, set(busy)
        self.raylets.requested = copy.deepcopy(requested or [])
        if self.version == "v2":
            assert self.v2.update_autoscaling_state() is not None, \
                "Ray's autoscaler v2 raised in its update (logged above)"
            return
        for name, instance in self.raylets.alive().items():
            total = self.raylets.total(instance)
            self.load_metrics.update(
                instance["networkInterfaces"][0]["networkIP"], ray_node_id(name), total,
                {k: 0.0 for k in total} if name in busy else dict(total),
                (idle_s or {}).get(name, 0.0))
        self.load_metrics.set_resource_requests(copy.deepcopy(requested or []))
        self.v1.update()
        deadline = time.monotonic() + 30
        while self.v1.pending_launches.value and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.v1.num_failures == 0, "Ray's autoscaler v1 raised during update()"

    def bundles(self, workers: int, node_type: str) -> list[dict[str, float]]:
        """`request_resources(bundles=...)` for the head's resources and `workers` workers'
        of `node_type`, one bundle per node."""
        types = self.config["available_node_types"]
        return [dict(types[self.config["head_node_type"]]["resources"]),
                *[dict(types[node_type]["resources"]) for _ in range(workers)]]
