"""Ray's autoscaler v2, run against the nodes our program creates, with the v1 test's contract:
it never raises, never terminates or drains the head or a node a WorkerGroup owns, launches
only for work our nodes cannot take, retires its own idle workers, and `ray status` lists every
node; and so across v2's timeouts (REQUESTED 600 s, RAY_INSTALLING 1800 s, ALLOCATED 3600 s,
idle termination), on a clock the test moves.

Ray's code runs as the head's v2 monitor runs it: `Autoscaler` with its `FileConfigReader`,
instance manager, reconciler and scheduler, and `NodeProviderAdapter` around Ray's own
`GCPNodeProvider`, against the fake Compute API (clients pointed at it as in the v1 test).
`ray status` is Ray's `ClusterStatusParser` and `ClusterStatusFormatter`. Replaced: the clock
of v2's instance manager, reconciler and scheduler; the thread pools of the adapter and of
`RayStopper` (their work runs inline, so a cycle's launches are done when it returns); and the
GCS, a stub that describes each running instance as a Ray node the way the raylet reports it:
from the environment our startup script (the one in the instance's metadata, run up to its
steps with the metadata it would read on GCE) gives `ray start`, through Ray's own readers of
that environment. The stub runs work wherever it fits, as raylets do, and reports the rest as
pending demand; a drained node's Ray exits (DEAD).
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import ray._private.services as ray_services
import ray.autoscaler.v2.instance_manager.common as v2_common
import ray.autoscaler.v2.instance_manager.node_provider as v2_node_provider
import ray.autoscaler.v2.instance_manager.reconciler as v2_reconciler
import ray.autoscaler.v2.instance_manager.subscribers.ray_stopper as v2_ray_stopper
import ray.autoscaler.v2.scheduler as v2_scheduler
import yaml
from ray._private.resource_and_label_spec import ResourceAndLabelSpec
from ray.autoscaler.v2.autoscaler import Autoscaler
from ray.autoscaler.v2.instance_manager.config import FileConfigReader, InstanceReconcileConfig
from ray.autoscaler.v2.schema import Stats
from ray.autoscaler.v2.utils import ClusterStatusFormatter, ClusterStatusParser
from ray.core.generated.autoscaler_pb2 import (
    ClusterResourceState,
    GetClusterResourceStateReply,
    GetClusterStatusReply,
    NodeState,
    NodeStatus,
    ResourceRequest,
    ResourceRequestByCount,
)
from ray.core.generated.instance_manager_pb2 import Instance as IMInstance

from infra.workers import ClusterSweeperProvider
from ops.review.plan_engine import PLANNED_PRIVATE_KEY
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import FAST_DEADLINES, fast_retry
from tests.support import ray_cooperation
from tests.support.ray_cooperation import (
    CYCLES,
    FLEX_WAIT_S,
    IDLE_FOR_AN_HOUR,
    OTHER_ZONE,
    PINNED_STACKS,
    Cluster,
    InlineExecutor,
    active_lines,
    assert_on_demand_fallback,
    assert_reserved_then_flex_start,
    create_groups,
    fake_fixture,  # noqa: F401 (pytest finds it by name: `fake`)
    head_metadata_files,
    hourly_cap_with_room,
    idle_an_hour,
    install_head_provider,
    ip_of,
    most_workers,
    node_bundles,
    past_the_maximum,
    planned,
    planned_ladder,
    ray_apis_fixture,  # noqa: F401 (`ray_apis_at_fake`)
    requested_constraint,
    reservation_full_spot_out,
    running,
    spot_out_at_home,
    spot_with_fallback,
    start_cluster,
    start_with_one_pinned,
)

# The module's plans come from one per-worker cache (tests/support/ray_cooperation.py): its
# tests share a worker, so each plan is made once.
pytestmark = pytest.mark.xdist_group("ray-autoscaler-v2-cooperation")

STACKS = ["full", "minimal"]
RAY_DEFAULT_MAX_WORKERS = 2  # Ray's GCP defaults (the `minimal` stack leaves max_workers out)
STEPS_MARKER = "# ---- the steps, in order"  # where a rendered script's steps begin
TIMEOUTS = InstanceReconcileConfig()
LONGEST_TIMEOUT_S = max(TIMEOUTS.request_status_timeout_s, TIMEOUTS.ray_install_status_timeout_s,
                        TIMEOUTS.allocate_status_timeout_s)


_node_id = ray_cooperation.node_id


class Clock:
    """The `time` module of v2's instance manager, reconciler and scheduler."""

    def __init__(self, start: float) -> None:
        self.now = start

    def time(self) -> float:
        return self.now

    def time_ns(self) -> int:
        return int(self.now * 1e9)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


# ------------------------------------------------------------- a node's `ray start`


def ray_start_env(instance: dict[str, Any], project: str, workdir: Path) -> dict[str, str]:
    """The `RAY_*` environment `ray start` gets on this instance: its startup script (from its
    metadata) run up to its steps, then the two functions its start stage runs before `ray
    start` (export_resources, export_ray_identity), with what GCE's metadata server would
    answer (attributes, name, zone, scheduling) in files, as the script reads them locally."""
    items = {i["key"]: i["value"] for i in instance["metadata"].get("items", [])}
    script = items["startup-script"]
    root = workdir / instance["name"]
    attributes = root / "attributes"
    attributes.mkdir(parents=True, exist_ok=True)
    for key, value in items.items():
        (attributes / key).write_text(value)
    zone = instance["zone"].rsplit("/", 1)[-1]
    scheduling = instance.get("scheduling") or {}
    served = {
        "instance/name": instance["name"],
        "instance/machine-type": "projects/123456789/machineTypes/"
                                 + instance["machineType"].rsplit("/", 1)[-1],
        "instance/zone": f"projects/123456789/zones/{zone}",
        "instance/scheduling/preemptible": "TRUE" if scheduling.get("preemptible") else "FALSE",
        "instance/scheduling/provisioning-model": scheduling.get("provisioningModel", "STANDARD"),
        "project/project-id": project,
    }
    for path, value in served.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(value)
    driver = root / "start-env.sh"
    driver.write_text(script[: script.index(STEPS_MARKER)]
                      + 'open_log\nexport_resources\nexport_ray_identity\neval "$ENV_PREFIX"\n'
                      + f"env -0 > '{root / 'start-env'}'\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update(RAY_BOOTSTRAP_METADATA_DIR=str(attributes), RAY_BOOTSTRAP_LOG=str(root / "log"))
    subprocess.run(["sh", str(driver)], env=env, capture_output=True, check=True, timeout=60)
    pairs = (entry.split("=", 1) for entry in (root / "start-env").read_text().split("\0")
             if entry)
    return {key: value for key, value in pairs
            if key.startswith("RAY_") and not key.startswith("RAY_BOOTSTRAP_")}


@dataclass
class RayNode:
    """One raylet as the GCS knows it, from its `ray start` environment."""

    name: str
    ip: str
    env: dict[str, str]
    is_head: bool
    dead: bool = False

    @property
    def total(self) -> dict[str, float]:
        resources = dict(json.loads(self.env.get("RAY_OVERRIDE_RESOURCES", "{}")))
        return {**resources, "node:__internal_head__": 1.0} if self.is_head else resources

    def state(self) -> NodeState:
        """What the raylet reports, read from its environment with Ray's own readers."""
        with mock.patch.dict(os.environ, self.env):
            instance_id = ray_services.get_node_instance_id()
            labels = {**ResourceAndLabelSpec._get_default_labels(None),
                      **ResourceAndLabelSpec._load_env_labels()}
        return NodeState(
            node_id=_node_id(self.name),
            instance_id=instance_id,
            ray_node_type_name=self.env.get("RAY_NODE_TYPE_NAME", ""),
            instance_type_name=self.env.get("RAY_CLOUD_INSTANCE_TYPE_NAME", ""),
            node_ip_address=self.ip,
            total_resources=self.total,
            labels=labels,
        )


@dataclass
class FakeGcs:
    """The head's GCS as autoscaler v2 asks it (GcsClient's calls it makes)."""

    cluster: Cluster
    fake: FakeComputeServer
    workdir: Path
    nodes: dict[str, RayNode] = field(default_factory=dict)
    drained: list[str] = field(default_factory=list)
    withheld: set[str] = field(default_factory=set)  # instances whose Ray never starts
    without_instance_id: set[str] = field(default_factory=set)  # as if the env lacked it
    version: int = 0
    idle_s: dict[str, float] = field(default_factory=dict)
    busy: set[str] = field(default_factory=set)
    demand: list[dict[str, float]] = field(default_factory=list)
    requested: list[dict[str, float]] = field(default_factory=list)  # request_resources

    @property
    def address(self) -> str:
        return f"{self.nodes[self.cluster.head_name].ip}:6379"

    def boot(self) -> None:
        """Every running instance's Ray has started (unless withheld); a deleted one's is
        DEAD."""
        instances = running(self.cluster, self.fake)
        for name, instance in instances.items():
            if name in self.nodes or name in self.withheld:
                continue
            env = ray_start_env(instance, self.cluster.project, self.workdir)
            if name in self.without_instance_id:
                env.pop("RAY_CLOUD_INSTANCE_ID", None)
            self.nodes[name] = RayNode(name, ip_of(instance), env,
                                       instance["labels"]["ray-node-type"] == "head")
        for name, node in self.nodes.items():
            node.dead = node.dead or name not in instances

    def get_cluster_resource_state(self) -> bytes:
        self.version += 1
        state = ClusterResourceState(cluster_resource_state_version=self.version)
        free = {name: ({} if name in self.busy else dict(node.total))
                for name, node in self.nodes.items() if not node.dead}
        used: set[str] = set()
        pending: list[dict[str, float]] = []
        for bundle in self.demand:  # raylets run work wherever it fits
            place = next((name for name, left in free.items()
                          if all(left.get(k, 0.0) >= v for k, v in bundle.items())), None)
            if place is None:
                pending.append(bundle)
                continue
            used.add(place)
            for key, amount in bundle.items():
                free[place][key] -= amount
        for name, node in self.nodes.items():
            report = node.state()
            report.node_state_version = self.version
            if node.dead:
                report.status = NodeStatus.DEAD
            else:
                report.available_resources.update(free[name])
                idle = name not in self.busy and name not in used
                report.status = NodeStatus.IDLE if idle else NodeStatus.RUNNING
                report.idle_duration_ms = int(self.idle_s.get(name, 0.0) * 1000) if idle else 0
            state.node_states.append(report)
        for bundle in pending:
            state.pending_resource_requests.append(ResourceRequestByCount(
                request=ResourceRequest(resources_bundle=bundle), count=1))
        if self.requested:  # the GCS keeps the last request_resources as one constraint
            state.cluster_resource_constraints.append(requested_constraint(self.requested))
        return GetClusterResourceStateReply(cluster_resource_state=state).SerializeToString()

    def drain_node(self, node_id: str, reason: int, reason_message: str,
                   deadline_timestamp_ms: int) -> tuple[bool, str]:
        """Accepted; the drained raylet exits (DEAD from the next report)."""
        node = next(n for n in self.nodes.values() if _node_id(n.name).hex() == node_id)
        self.drained.append(node.name)
        node.dead = True
        return True, ""

    def drain_nodes(self, node_ids: list[bytes], timeout: int | None = None) -> list[bytes]:
        for node in self.nodes.values():
            if _node_id(node.name) in node_ids:
                self.drained.append(node.name)
                node.dead = True
        return list(node_ids)


class RayHeadV2:
    """The head's v2 monitor loop: `Autoscaler.update_autoscaling_state()` each cycle."""

    def __init__(self, cluster: Cluster, fake: FakeComputeServer, gcs: FakeGcs,
                 clock: Clock, home: Path) -> None:
        self.cluster, self.fake, self.gcs, self.clock = cluster, fake, gcs, clock
        (home / "ray_bootstrap_key.pem").write_text(PLANNED_PRIVATE_KEY)
        config_file = home / "ray_bootstrap_config.yaml"
        config_file.write_text(yaml.safe_dump(cluster.bootstrap_config))
        gcs.boot()
        self.autoscaler = Autoscaler("session_test", FileConfigReader(str(config_file)), gcs)
        self.state: Any = None
        self.provider_archive: Path | None = None  # the head's provider, as shipped

    def running(self) -> dict[str, dict[str, Any]]:
        return running(self.cluster, self.fake)

    def cycle(self, idle_s: dict[str, float] | None = None, busy: set[str] = frozenset(),
              demand: list[dict[str, float]] | None = None, after_s: float = 5.0,
              requested: list[dict[str, float]] | None = None) -> None:
        """`after_s` later, one monitor iteration: new instances' Ray has started, every node
        reports (idle for `idle_s[name]`, all in use on `busy`), `demand` waits, and
        `request_resources` last asked for `requested`."""
        self.clock.sleep(after_s)
        self.gcs.boot()
        self.gcs.idle_s, self.gcs.busy, self.gcs.demand = idle_s or {}, set(busy), demand or []
        self.gcs.requested = requested or []
        state = self.autoscaler.update_autoscaling_state()
        assert state is not None, "Ray's autoscaler v2 raised in its update (logged above)"
        self.state = state

    def instances(self) -> dict[str, int]:
        """The instance manager's view: cloud instance id -> status."""
        im = self.autoscaler._instance_manager.get_instance_manager_state(request=None)
        return {i.cloud_instance_id: i.status for i in im.state.instances}

    def status(self) -> str:
        """What `ray status -v` prints on the head for this state."""
        resource_state = GetClusterResourceStateReply.FromString(
            self.gcs.get_cluster_resource_state()).cluster_resource_state
        reply = GetClusterStatusReply(autoscaling_state=self.state,
                                      cluster_resource_state=resource_state)
        parsed = ClusterStatusParser.from_get_cluster_status_reply(
            reply, Stats(gcs_request_time_s=0.0, request_ts_s=int(self.clock.now)))
        return ClusterStatusFormatter.format(parsed, verbose=True)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock(1_800_000_000.0)
    for module in (v2_common, v2_reconciler, v2_scheduler):
        monkeypatch.setattr(module, "time", clock)
    monkeypatch.setattr(v2_node_provider, "ThreadPoolExecutor", InlineExecutor)
    monkeypatch.setattr(v2_ray_stopper, "ThreadPoolExecutor", InlineExecutor)
    return clock


@pytest.fixture
def head_for(
    fake: FakeComputeServer,
    ray_apis_at_fake: None,
    clock: Clock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[Cluster], RayHeadV2]]:
    """Start Ray's v2 monitor loop on a head reading this cluster's bootstrap config."""
    monkeypatch.setenv("HOME", str(tmp_path))

    def start(cluster: Cluster) -> RayHeadV2:
        archive = install_head_provider(cluster, tmp_path, monkeypatch)
        head = RayHeadV2(cluster, fake, FakeGcs(cluster, fake, tmp_path / "nodes"), clock,
                         tmp_path)
        head.provider_archive = archive
        return head

    yield start


@dataclass
class Running:
    cluster: Cluster
    nodes: list[str]  # the head, then the worker groups' nodes
    head: RayHeadV2


def up(stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2],
       pinned_gcs: Callable[[FakeGcs], None] | None = None) -> Running:
    """The stack up under v2 with one worker Pulumi keeps (the `full` stack's own count;
    `minimal` keeps none unless asked, so one is asked for)."""
    counts = None if stack == "full" else {planned(stack, "v2").worker_type: 1}
    cluster = planned(stack, "v2", counts)
    nodes = start_cluster(cluster, fake)
    assert nodes[1:], f"the {stack} stack keeps a worker"
    return Running(cluster, nodes, head_for(cluster))


def per_node(cluster: Cluster) -> dict[str, float]:
    return dict(cluster.bootstrap_config["available_node_types"][cluster.worker_type]["resources"])


# ---------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize("stack", STACKS)
def test_every_node_tells_ray_start_what_v2_and_its_schedulers_read(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    cluster, nodes, head = (lambda r: (r.cluster, r.nodes, r.head))(up(stack, fake, head_for))
    head.cycle(busy=set(nodes), demand=[per_node(cluster)])
    head.cycle()
    (its_own,) = set(head.running()) - set(nodes)
    env = {name: node.env for name, node in head.gcs.nodes.items()}
    zone, region = cluster.zone, cluster.yaml["provider"]["region"]

    assert env[cluster.head_name]["RAY_enable_autoscaler_v2"] == "1"
    # Every node, Pulumi's too, tells v2 its instance: v2 joins each to the instance it lists.
    for name in (cluster.head_name, its_own, *nodes[1:]):
        assert env[name]["RAY_CLOUD_INSTANCE_ID"] == name
        assert env[name]["RAY_CLOUD_INSTANCE_TYPE_NAME"] == "n1-standard-2"
    for name in head.gcs.nodes:
        node_type = head.running()[name]["labels"]["ray-user-node-type"]
        labels = head.gcs.nodes[name].state().labels
        assert labels["ray.io/node-group"] == node_type
        assert labels["ray.io/availability-zone"] == zone
        assert labels["ray.io/availability-region"] == region
        scheduling = head.running()[name].get("scheduling") or {}
        spot = scheduling.get("preemptible") or scheduling.get("provisioningModel") == "SPOT"
        assert labels["ray.io/market-type"] == ("spot" if spot else "on-demand")
    # v2 joined each Ray node to its instance, Pulumi's as its type's pinned twin.
    im = head.autoscaler._instance_manager.get_instance_manager_state(request=None).state
    joined = {i.cloud_instance_id: (i.instance_type, i.status) for i in im.instances}
    running_ray = IMInstance.RAY_RUNNING
    assert joined[cluster.head_name] == (cluster.head_type, running_ray)
    assert joined[its_own] == (cluster.worker_type, running_ray)
    for name in nodes[1:]:
        assert joined[name] == (f"{cluster.worker_type}.pinned", running_ray)


def test_v2_runs_the_heads_own_provider_from_the_shipped_zip(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    head = up("minimal", fake, head_for).head
    head.cycle()
    provider = head.autoscaler._cloud_instance_provider.v1_provider
    assert type(provider).__name__ == "HeadNodeProvider"
    assert inspect.getfile(type(provider)).startswith(str(head.provider_archive))


@pytest.mark.parametrize("stack", STACKS)
def test_idle_cluster_keeps_pulumis_workers_and_launches_nothing(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    cluster, nodes, head = (lambda r: (r.cluster, r.nodes, r.head))(up(stack, fake, head_for))

    for _ in range(CYCLES):
        head.cycle(idle_s={name: IDLE_FOR_AN_HOUR for name in nodes})

    assert set(head.running()) == set(nodes)  # nothing terminated, nothing launched
    assert head.gcs.drained == []
    status = head.status()
    assert f"1 {cluster.head_type}" in active_lines(status)
    # Ours, as their type's pinned twin (the type v2 counts them as).
    assert f"{len(nodes) - 1} {cluster.worker_type}.pinned" in active_lines(status)
    for name in nodes:  # every node, ours too, in `ray status -v`
        assert f"Id: {_node_id(name).hex()}" in status


@pytest.mark.parametrize("stack", STACKS)
def test_demand_beyond_our_workers_launches_only_what_they_cannot_hold(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    cluster, nodes, head = (lambda r: (r.cluster, r.nodes, r.head))(up(stack, fake, head_for))

    # Work that fits on our idle worker runs there: no VM of v2's own.
    for _ in range(CYCLES):
        head.cycle(busy={cluster.head_name}, demand=[per_node(cluster)])
    assert set(head.running()) == set(nodes)

    # More than every node can hold: v2 adds its own, up to the cluster's max_workers, which
    # counts ours.
    yaml_max = cluster.yaml.get("max_workers", RAY_DEFAULT_MAX_WORKERS)
    backlog = [per_node(cluster)] * (yaml_max + 3)
    for _ in range(CYCLES):
        head.cycle(busy=set(head.running()), demand=backlog)
    launched = {n: i for n, i in head.running().items() if n not in nodes}
    assert len(launched) == yaml_max - len(nodes[1:])
    assert cluster.bootstrap_config["max_workers"] == yaml_max
    template = cluster.bootstrap_config["available_node_types"][cluster.worker_type]
    for instance in launched.values():
        labels = instance["labels"]
        assert labels["ray-node-type"] == "worker"  # the autoscaler's own kind
        assert labels["ray-cluster-name"] == cluster.yaml["cluster_name"]
        assert labels["ray-user-node-type"] == cluster.worker_type
        # It boots itself from the same startup script our workers carry.
        assert instance["metadata"]["items"] == template["node_config"]["metadata"]["items"]
    assert head.gcs.drained == []

    # `down`: the sweeper removes the autoscaler's nodes with ours and the head.
    sweeper = ClusterSweeperProvider(retry=fast_retry(), deadlines=FAST_DEADLINES)
    sweeper.sweep({"project": cluster.project, "zone": cluster.zone,
                   "cluster_name": cluster.yaml["cluster_name"], "has_tpu": False,
                   "credentials": None, "api_endpoint": fake.endpoint})
    assert fake.instances(cluster.project, cluster.zone) == {}


@pytest.mark.parametrize("stack", STACKS)
def test_autoscalers_own_worker_retires_when_idle_and_ours_stays(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    cluster, nodes, head = (lambda r: (r.cluster, r.nodes, r.head))(up(stack, fake, head_for))
    head.cycle(busy=set(nodes), demand=[per_node(cluster)])
    (its_own,) = set(head.running()) - set(nodes)

    # Its own node was used last; ours has idled for an hour: v2 must not touch ours.
    for _ in range(CYCLES):
        head.cycle(idle_s={**{name: IDLE_FOR_AN_HOUR for name in nodes}, its_own: 0.0})
    assert set(head.running()) == {*nodes, its_own}

    # Then its own idles past idle_timeout_minutes: v2 drains it and deletes its instance.
    for _ in range(CYCLES):
        head.cycle(idle_s={name: IDLE_FOR_AN_HOUR for name in (*nodes, its_own)})
    assert set(head.running()) == set(nodes)  # the head and ours stay
    assert head.gcs.drained == [its_own]


def test_scale_up_with_a_cycle_between_head_config_and_group_create_adds_no_extra_vm(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    before = planned("minimal", "v2")
    after = planned("minimal", "v2", {before.worker_type: 1})
    assert not before.groups[0]["count"] and after.groups[0]["count"] == 1
    start_cluster(before, fake)  # the head alone: the group keeps 0

    # `pulumi up` has updated the head's metadata (its watcher rewrote the config: one less
    # worker for v2) but the group has not created its worker yet: v2 runs in between.
    head = head_for(after)
    for _ in range(CYCLES):
        head.cycle(idle_s={before.head_name: IDLE_FOR_AN_HOUR})
    assert set(head.running()) == {before.head_name}

    ours = create_groups(after, fake)
    for _ in range(CYCLES):
        head.cycle(idle_s={name: IDLE_FOR_AN_HOUR for name in head.running()})
    assert set(head.running()) == {before.head_name, *ours}
    assert len(ours) == 1


@pytest.mark.parametrize("stack", STACKS)
def test_past_every_v2_timeout_the_head_and_ours_stay_and_a_worker_that_never_joins_goes(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    """Hours pass: each of v2's timeouts (600 s REQUESTED, 1800 s RAY_INSTALLING, 3600 s
    ALLOCATED) and the idle timeout expire many times over. A worker of v2's own whose Ray
    never starts is deleted at 3600 s, as v2 means to; nothing of ours is touched."""
    cluster, nodes, head = (lambda r: (r.cluster, r.nodes, r.head))(up(stack, fake, head_for))
    head.cycle(busy=set(nodes), demand=[per_node(cluster)])
    (stuck,) = set(head.running()) - set(nodes)
    head.gcs.withheld.add(stuck)  # its Ray never starts

    idle = {name: IDLE_FOR_AN_HOUR for name in nodes}
    for _ in range(6):
        head.cycle(idle_s=idle, after_s=LONGEST_TIMEOUT_S / 3 + 1)
    assert stuck not in head.running()  # never RAY_RUNNING: v2 deleted it
    for _ in range(4):
        head.cycle(idle_s=idle, after_s=LONGEST_TIMEOUT_S)
    assert set(head.running()) == set(nodes)
    assert head.gcs.drained == []
    assert head.instances()[cluster.head_name] == IMInstance.RAY_RUNNING


# ------------------------------------ spot with on-demand fallback (provider.capacity), v2

SPOT_TYPE = "ray_worker_small"  # the `full` stack's worker type, made spot here
SPOT_MAX = 4


def spot_up(fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]) -> Running:
    """`full` under v2 with its worker type spot, falling back to on-demand, room for
    SPOT_MAX workers; its pinned worker made while spot was there."""
    cluster = planned("full", "v2", edit=spot_with_fallback(SPOT_TYPE, SPOT_MAX))
    return Running(cluster, start_cluster(cluster, fake), head_for(cluster))


def grow_v2(up: Running) -> dict[str, dict[str, Any]]:
    """Work for more workers than the cluster may have, for a few cycles (one more, so the
    last launched have booted Ray): v2's launches."""
    per_node = up.cluster.bootstrap_config["available_node_types"][SPOT_TYPE]["resources"]
    for _ in range(CYCLES + 1):
        up.head.cycle(busy=set(up.head.running()), demand=[dict(per_node)] * (SPOT_MAX + 3))
    return {n: i for n, i in up.head.running().items() if n not in up.nodes}


def test_v2_spot_stocked_out_gives_on_demand_workers_labelled_and_counted_once(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    up = spot_up(fake, head_for)
    fake.faults.spot_capacity[up.cluster.zone] = 0  # GCE's stockout for every spot insert

    launched = grow_v2(up)

    # As many as spot would have given (v2 launches into the room Pulumi's worker leaves).
    assert len(launched) == SPOT_MAX - len(up.nodes[1:])
    for name, instance in launched.items():
        assert_on_demand_fallback(instance)
        # Its Ray says so to Ray's schedulers, and v2 joined it to its one instance.
        assert up.head.gcs.nodes[name].state().labels["ray.io/market-type"] == "on-demand"
        assert up.head.instances()[name] == IMInstance.RAY_RUNNING
    # No failed allocation, no second instance for one request: the IM knows exactly these
    # (and the head and ours).
    workers = {i: s for i, s in up.head.instances().items() if i not in up.nodes}
    assert workers == {name: IMInstance.RAY_RUNNING for name in launched}
    grow_v2(up)
    assert set(up.head.running()) == {*up.nodes, *launched}
    lines = active_lines(up.head.status())
    assert f"{len(launched)} {SPOT_TYPE}" in lines
    assert f"{len(up.nodes) - 1} {SPOT_TYPE}.pinned" in lines


def test_v2_spot_available_gives_spot_workers_as_before(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    up = spot_up(fake, head_for)

    launched = grow_v2(up)

    assert len(launched) == SPOT_MAX - len(up.nodes[1:])
    for name, instance in launched.items():
        assert instance["scheduling"] == {"provisioningModel": "SPOT",
                                          "instanceTerminationAction": "DELETE"}
        assert instance["labels"]["ray-capacity"] == "spot"
        assert up.head.gcs.nodes[name].state().labels["ray.io/market-type"] == "spot"


def test_v2_demand_walks_the_ladder_and_ray_sees_each_nodes_market_and_zone(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    cluster = planned_ladder("v2", fake, SPOT_TYPE, SPOT_MAX)
    up = Running(cluster, start_cluster(cluster, fake), head_for(cluster))
    reservation_full_spot_out(cluster, fake, room=1)

    grow_v2(up)  # the flex-start nodes are PENDING meanwhile: Ray counts them, adds none
    time.sleep(FLEX_WAIT_S)
    launched = grow_v2(up)
    assert len(fake.instances(cluster.project, cluster.zone)) == len(up.nodes) + len(launched)

    assert_reserved_then_flex_start(launched, SPOT_MAX - len(up.nodes[1:]))
    for name in launched:
        ray_labels = up.head.gcs.nodes[name].state().labels
        # Reserved and flex-start nodes are not preemptible: on-demand to Ray's schedulers.
        assert ray_labels["ray.io/market-type"] == "on-demand"
        assert ray_labels["ray.io/availability-zone"] == cluster.zone
    # Nothing made twice: the IM knows exactly these, each running Ray.
    workers = {i: s for i, s in up.head.instances().items() if i not in up.nodes}
    assert workers == {name: IMInstance.RAY_RUNNING for name in launched}
    grow_v2(up)
    assert set(up.head.running()) == {*up.nodes, *launched}


def test_v2_spot_out_at_home_walks_to_the_rungs_other_zone_and_ray_sees_that_zone(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    cluster, nodes = spot_out_at_home("v2", fake, SPOT_TYPE, SPOT_MAX)
    up = Running(cluster, nodes, head_for(cluster))
    launched = grow_v2(up)

    assert launched and set(launched) == set(fake.instances(cluster.project, OTHER_ZONE))
    for name in launched:
        labels = up.head.gcs.nodes[name].state().labels
        assert labels["ray.io/availability-zone"] == OTHER_ZONE
        assert labels["ray.io/market-type"] == "spot"
    workers = {i: s for i, s in up.head.instances().items() if i not in up.nodes}
    assert workers == {name: IMInstance.RAY_RUNNING for name in launched}  # each once
    for _ in range(GROWN):
        up.head.cycle(idle_s=idle_an_hour(up.head.running()))
    fake.cloud.settle()
    assert fake.instances(cluster.project, OTHER_ZONE) == {}  # terminated in their own zone
    assert sorted(up.head.gcs.drained) == sorted(launched)


# ------------------------------------------- the spend cap's launch check (provider.spend_cap)


def test_v2_a_launch_over_the_hourly_cap_is_refused_and_says_why_in_the_log_and_ray_status(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Room for half a worker more: v2's launches are refused, cycle after cycle, nothing is
    created and nothing raises; why is in the autoscaler's log (v2's `ray status` names the
    failed launch `LaunchFailed` and keeps no cause) and on the head's labels."""
    cluster = planned("full", "v2", edit=hourly_cap_with_room(SPOT_TYPE, 0.5))
    head_metadata_files(cluster, tmp_path, monkeypatch)
    up = Running(cluster, start_cluster(cluster, fake), head_for(cluster))
    per_node = cluster.bootstrap_config["available_node_types"][SPOT_TYPE]["resources"]

    with caplog.at_level(logging.INFO):
        for _ in range(CYCLES + 1):
            up.head.cycle(busy=set(up.head.running()), demand=[dict(per_node)] * 3)

    assert set(up.head.running()) == set(up.nodes)
    assert len(fake.instances(cluster.project, cluster.zone)) == len(up.nodes)
    reason = f"spend cap: launching 1 {SPOT_TYPE} node(s)"
    assert any(f"Failed to launch 1 nodes of type {SPOT_TYPE}: Node Launch Exception "
               f"(SpendCap): {reason}" in r.getMessage() for r in caplog.records)
    assert f" {SPOT_TYPE}: LaunchFailed (latest_attempt: " in up.head.status()
    labels = fake.instances(cluster.project, cluster.zone)[cluster.head_name]["labels"]
    assert labels["ray-spend-refused"] == SPOT_TYPE


# ------------------------------------ the workers Pulumi pins, counted by v2 (issue 36)

GROWN = CYCLES + 3  # cycles enough for v2 to launch all it will at upscaling_speed 1


def pinned_up(stack: str, fake: FakeComputeServer,
              head_for: Callable[[Cluster], RayHeadV2]) -> Running:
    """The stack under v2 with one worker Pulumi keeps (ray_cooperation.with_one_pinned)."""
    cluster, nodes = start_with_one_pinned(stack, "v2", fake)
    return Running(cluster, nodes, head_for(cluster))


@pytest.mark.parametrize("stack", PINNED_STACKS)
def test_v2_request_resources_that_fits_on_the_head_and_pinned_worker_launches_nothing(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    run = pinned_up(stack, fake, head_for)

    for _ in range(GROWN):
        run.head.cycle(idle_s=idle_an_hour(run.nodes), requested=node_bundles(run.cluster, 1))

    assert set(run.head.running()) == set(run.nodes)
    assert run.head.gcs.drained == []
    assert run.head.instances()[run.nodes[1]] == IMInstance.RAY_RUNNING  # counted by v2
    assert active_lines(run.head.status())[-2:] == [
        f"1 {run.cluster.head_type}", f"1 {run.cluster.worker_type}.pinned"]


@pytest.mark.parametrize("stack", PINNED_STACKS)
def test_v2_request_resources_needing_one_more_node_launches_exactly_one(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    run = pinned_up(stack, fake, head_for)

    for _ in range(GROWN):
        run.head.cycle(requested=node_bundles(run.cluster, 2))

    (launched,) = set(run.head.running()) - set(run.nodes)
    assert run.head.running()[launched]["labels"]["ray-user-node-type"] == run.cluster.worker_type
    assert run.head.instances()[launched] == IMInstance.RAY_RUNNING
    lines = active_lines(run.head.status())
    assert f"1 {run.cluster.worker_type}" in lines
    assert f"1 {run.cluster.worker_type}.pinned" in lines
    assert run.head.gcs.drained == []


def grow_past_the_maximum(run: Running) -> set[str]:
    """Every node busy and more work waiting than the cluster may ever hold, with
    request_resources asking for the head and the pinned worker: v2's launches."""
    for _ in range(GROWN):
        run.head.cycle(busy=set(run.head.running()), demand=past_the_maximum(run.cluster),
                       requested=node_bundles(run.cluster, 1))
    return set(run.head.running()) - set(run.nodes)


@pytest.mark.parametrize("stack", PINNED_STACKS)
def test_v2_demand_beyond_max_workers_launches_up_to_the_maximum_counting_the_pinned_worker(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    run = pinned_up(stack, fake, head_for)

    launched = grow_past_the_maximum(run)

    most = most_workers(run.cluster)
    assert len(launched) == most - 1
    assert set(run.nodes) <= set(run.head.running())
    assert {run.head.instances()[name] for name in launched} == {IMInstance.RAY_RUNNING}
    lines = active_lines(run.head.status())
    assert f"{most - 1} {run.cluster.worker_type}" in lines
    assert f"1 {run.cluster.worker_type}.pinned" in lines
    assert run.head.gcs.drained == []


@pytest.mark.parametrize("stack", PINNED_STACKS)
def test_v2_idle_autoscaled_workers_retire_and_the_pinned_worker_never(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    run = pinned_up(stack, fake, head_for)
    launched = grow_past_the_maximum(run)
    assert launched

    for _ in range(GROWN):
        run.head.cycle(idle_s=idle_an_hour(run.head.running()))

    assert set(run.head.running()) == set(run.nodes)
    assert sorted(run.head.gcs.drained) == sorted(launched)
    assert run.head.instances()[run.nodes[1]] == IMInstance.RAY_RUNNING


@pytest.mark.parametrize("stack", PINNED_STACKS)
def test_v2_a_preempted_pinned_worker_is_not_replaced_by_the_autoscaler(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    """Pulumi keeps its workers (the next `invoke up` makes the group's node again): v2
    neither launches one in its place nor counts the lost one."""
    run = pinned_up(stack, fake, head_for)
    run.head.cycle(idle_s=idle_an_hour(run.nodes))
    fake.cloud.preempt(run.cluster.project, run.cluster.zone, run.nodes[1])

    for _ in range(GROWN):
        run.head.cycle(idle_s=idle_an_hour(run.head.running()))

    assert set(fake.instances(run.cluster.project, run.cluster.zone)) == {run.cluster.head_name}
    # A request for the head and a worker now needs a worker of v2's own: one.
    for _ in range(GROWN):
        run.head.cycle(requested=node_bundles(run.cluster, 1))
    assert len(set(run.head.running()) - {run.cluster.head_name}) == 1


def test_v2_scale_down_with_a_cycle_between_head_config_and_group_delete_drains_nothing(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    """`pulumi up` updates the head (its config: the count lowered) before the group deletes
    its node: v2 runs in between and must not scale Pulumi's node down itself."""
    before, nodes = start_with_one_pinned("minimal", "v2", fake)
    after = planned("minimal", "v2", {before.worker_type: 0})
    head = head_for(after)

    for _ in range(GROWN):
        head.cycle(idle_s=idle_an_hour(nodes))

    assert set(head.running()) == set(nodes)
    assert head.gcs.drained == []


def test_v2_a_pinned_worker_whose_ray_never_starts_outlives_every_v2_timeout(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2],
    caplog: pytest.LogCaptureFixture
) -> None:
    """v2 deletes an instance that stays ALLOCATED past its timeout (its own, rightly); the
    head's provider refuses that for a node Pulumi keeps, and says so in the log."""
    run = pinned_up("full", fake, head_for)
    ours = run.nodes[1]
    run.head.gcs.nodes.pop(ours)
    run.head.gcs.withheld.add(ours)  # its Ray never starts

    with caplog.at_level(logging.WARNING):
        for _ in range(6):
            run.head.cycle(idle_s=idle_an_hour(run.nodes), after_s=LONGEST_TIMEOUT_S / 2 + 1)

    assert set(run.head.running()) == set(run.nodes)
    assert any(f"{ours} is a worker Pulumi keeps: the autoscaler never terminates it"
               in record.getMessage() for record in caplog.records)
    assert run.head.gcs.drained == []


# ------------------------------------------------------ what the design rests on (Ray's v2)


def test_a_head_reporting_no_instance_id_is_deleted_by_v2_after_an_hour(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHeadV2]
) -> None:
    """Why every node Ray manages reports RAY_CLOUD_INSTANCE_ID: without it (a head started
    as before, `ray start --head` alone) v2 never sees the head RAY_RUNNING, never scales, and
    deletes the head once ALLOCATED passes its timeout."""
    cluster = planned("minimal", "v2")
    start_cluster(cluster, fake)
    head = head_for(cluster)
    head.gcs.nodes.clear()
    head.gcs.without_instance_id.add(cluster.head_name)
    head.cycle(demand=[per_node(cluster)] * 2)
    assert set(head.running()) == {cluster.head_name}  # no scaling before the head runs
    head.cycle(after_s=TIMEOUTS.allocate_status_timeout_s + 1)
    head.cycle()
    assert cluster.head_name not in head.running()
