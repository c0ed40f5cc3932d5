"""Ray's own autoscaler v1, run against the nodes our program creates: it never raises, never
terminates a node a WorkerGroup owns, launches only for demand our nodes cannot hold, and
`ray status` shows every node.

Nothing of Ray is restated here: `StandardAutoscaler`, its `GCPNodeProvider`, `LoadMetrics`
and `format_info_string` (what `ray status` prints) all come from the installed wheel. Only how
Ray builds its Google API clients is replaced, to point them at the fake Compute API with
anonymous credentials, and the GCS client is a stub (the autoscaler only drains through it).
The start state is what the program registers under mocks for a shipped stack: the head's
labels and `~/ray_bootstrap_config.yaml` (its metadata), and the worker groups' nodes made by
`WorkerGroupProvider.create` from the group's registered inputs.
"""

from __future__ import annotations

import copy
import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray.autoscaler._private.autoscaler import StandardAutoscaler
from ray.autoscaler._private.load_metrics import LoadMetrics
from ray.autoscaler._private.util import format_info_string

from bootstrap.autostop import Autostop, Cloud, Metadata, RayState
from bootstrap.local_cluster import free_port
from infra.workers import ClusterSweeperProvider
from ops.review.plan_engine import PLANNED_PRIVATE_KEY, run_program
from tests.fakes.compute import FakeComputeServer
from tests.fakes.compute.helpers import FAST_DEADLINES, fast_retry
from tests.support.program_grants import local_metadata_token
from tests.support.ray_cooperation import (
    CYCLES,
    FLEX_WAIT_S,
    IDLE_FOR_AN_HOUR,
    OTHER_ZONE,
    PINNED_STACKS,
    Cluster,
    active_lines,
    assert_on_demand_fallback,
    assert_reserved_then_flex_start,
    create_groups,
    fake_fixture,  # noqa: F401 (pytest finds it by name: `fake`)
    head_credentials,
    head_metadata_files,
    hourly_cap_with_room,
    idle_an_hour,
    install_head_provider,
    ip_of,
    market_of_instance,
    most_workers,
    node_bundles,
    node_id,
    past_the_maximum,
    planned,
    planned_ladder,
    ray_apis_fixture,  # noqa: F401 (`ray_apis_at_fake`)
    reservation_full_spot_out,
    running,
    spot_out_at_home,
    spot_with_fallback,
    start_cluster,
    start_with_one_pinned,
)

# The module's plans come from one per-worker cache (tests/support/ray_cooperation.py): its
# tests share a worker, so each plan is made once.
pytestmark = pytest.mark.xdist_group("ray-autoscaler-v1-cooperation")


class DrainingGcs:
    """The only GCS call the v1 autoscaler makes: drain raylets before terminating them."""

    def __init__(self) -> None:
        self.drained: list[bytes] = []

    def drain_nodes(self, node_ids: set[bytes], timeout: int) -> list[bytes]:
        self.drained += sorted(node_ids)
        return list(node_ids)


class RayHead:
    """The head's monitor loop as Ray's `monitor.py` runs it: load metrics from what the
    raylets report, then `StandardAutoscaler.update()`."""

    def __init__(
        self,
        cluster: Cluster,
        fake: FakeComputeServer,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        self.cluster, self.fake = cluster, fake
        # The head's home: the cluster key it fetched from Secret Manager, and the config.
        monkeypatch.setenv("HOME", str(tmp_path))
        (tmp_path / "ray_bootstrap_key.pem").write_text(PLANNED_PRIVATE_KEY)
        config_file = tmp_path / "ray_bootstrap_config.yaml"
        config_file.write_text(yaml.safe_dump(cluster.bootstrap_config))
        self.provider_archive = install_head_provider(cluster, tmp_path, monkeypatch)
        self.load_metrics = LoadMetrics()
        self.gcs = DrainingGcs()
        self.autoscaler = StandardAutoscaler(
            str(config_file), self.load_metrics, self.gcs, update_interval_s=0
        )

    def running(self) -> dict[str, dict[str, Any]]:
        return running(self.cluster, self.fake)

    def report(
        self,
        idle_s: dict[str, float] | None = None,
        busy: set[str] = frozenset(),
        demand: list[dict[str, float]] | None = None,
    ) -> None:
        """Every running node's raylet reports: its type's resources, all in use on `busy`
        nodes, idle for `idle_s[name]` seconds (0 unless given); `demand` is waiting work."""
        node_types = self.cluster.bootstrap_config["available_node_types"]
        for name, instance in self.running().items():
            ip = instance["networkInterfaces"][0]["networkIP"]
            total = dict(node_types[instance["labels"]["ray-user-node-type"]]["resources"])
            available = {k: 0.0 for k in total} if name in busy else dict(total)
            self.load_metrics.update(
                ip,
                node_id(name),
                total,
                available,
                (idle_s or {}).get(name, 0.0),
                waiting_bundles=copy.deepcopy(demand or []),
            )

    def cycle(self, requested: list[dict[str, float]] | None = None, **report: Any) -> None:
        """One monitor iteration, `request_resources` having last asked for `requested`
        (the monitor hands it to LoadMetrics each time); Ray's background launches are
        waited for."""
        self.report(**report)
        self.load_metrics.set_resource_requests(copy.deepcopy(requested or []))
        self.autoscaler.update()
        deadline = time.monotonic() + 30
        while self.autoscaler.pending_launches.value and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.autoscaler.num_failures == 0, "Ray's autoscaler raised during update()"

    def status(self) -> str:
        """What `ray status -v` prints on the head for this state."""
        return format_info_string(
            self.load_metrics.summary(), self.autoscaler.summary(), verbose=True
        )


@pytest.fixture
def head_for(
    fake: FakeComputeServer,
    ray_apis_at_fake: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[Cluster], RayHead]:
    """Start Ray's monitor loop on a head reading this cluster's bootstrap config."""
    return lambda cluster: RayHead(cluster, fake, tmp_path, monkeypatch)


@dataclass
class Running:
    cluster: Cluster
    nodes: list[str]  # the head, then the worker groups' nodes
    head: RayHead


@pytest.fixture
def full(fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]) -> Running:
    """The `full` stack up: its head and its worker group's node, Ray's autoscaler on it."""
    cluster = planned("full", "v1")
    nodes = start_cluster(cluster, fake)
    assert nodes[1:], "the full stack keeps a worker"
    return Running(cluster, nodes, head_for(cluster))


# ---------------------------------------------------------------------------- scenarios


def test_idle_cluster_keeps_pulumis_workers_and_launches_nothing(full: Running) -> None:
    cluster, nodes, head = full.cluster, full.nodes, full.head

    for _ in range(CYCLES):
        head.cycle(idle_s={name: IDLE_FOR_AN_HOUR for name in nodes})

    assert set(head.running()) == set(nodes)  # nothing terminated, nothing launched
    assert head.gcs.drained == []
    status = head.status()
    assert f"1 {cluster.yaml['head_node_type']}" in active_lines(status)
    for instance in head.running().values():  # every node, ours too, in `ray status -v`
        assert f"Node: {ip_of(instance)}" in status


def test_rays_autoscaler_runs_the_heads_own_provider_from_the_shipped_zip(full: Running) -> None:
    full.head.cycle()
    provider = full.head.autoscaler.provider
    assert type(provider).__name__ == "HeadNodeProvider"
    assert inspect.getfile(type(provider)).startswith(str(full.head.provider_archive))


def test_demand_beyond_our_workers_launches_only_what_they_cannot_hold(
    full: Running, fake: FakeComputeServer
) -> None:
    cluster, nodes, head = full.cluster, full.nodes, full.head
    worker_type = cluster.groups[0]["node_type"]
    per_node = cluster.yaml["available_node_types"][worker_type]["resources"]

    # Work that fits on our idle worker: Ray packs it there, no VM of its own.
    for _ in range(CYCLES):
        head.cycle(busy={cluster.head_name}, demand=[dict(per_node)])
    assert set(head.running()) == set(nodes)

    # More than every node can hold: Ray adds its own, up to the cluster's max_workers,
    # which counts our worker.
    backlog = [dict(per_node)] * (cluster.yaml["max_workers"] + 3)
    for _ in range(CYCLES):
        head.cycle(busy=set(head.running()), demand=backlog)
    launched = {n: i for n, i in head.running().items() if n not in nodes}
    assert len(launched) == cluster.yaml["max_workers"] - len(nodes[1:])
    template = cluster.bootstrap_config["available_node_types"][worker_type]["node_config"]
    for instance in launched.values():
        labels = instance["labels"]
        assert labels["ray-node-type"] == "worker"  # the autoscaler's own kind
        assert labels["ray-cluster-name"] == cluster.yaml["cluster_name"]
        assert labels["ray-user-node-type"] == worker_type
        # It boots itself from the same startup script our workers carry.
        assert instance["metadata"]["items"] == template["metadata"]["items"]

    # `down`: the sweeper removes the autoscaler's nodes with ours and the head.
    sweeper = ClusterSweeperProvider(retry=fast_retry(), deadlines=FAST_DEADLINES)
    sweeper.sweep({"project": cluster.project, "zone": cluster.zone,
                   "cluster_name": cluster.yaml["cluster_name"], "has_tpu": False,
                   "credentials": None, "api_endpoint": fake.endpoint})
    assert fake.instances(cluster.project, cluster.zone) == {}


def test_autoscalers_own_worker_retires_when_idle_and_ours_stays(full: Running) -> None:
    cluster, nodes, head = full.cluster, full.nodes, full.head
    worker_type = cluster.groups[0]["node_type"]
    per_node = cluster.yaml["available_node_types"][worker_type]["resources"]
    head.cycle(busy=set(nodes), demand=[dict(per_node)])
    (its_own,) = set(head.running()) - set(nodes)

    # Its own node was used last; ours has idled for an hour: Ray keeps the most recently
    # used workers of a type, and still must not touch ours.
    for _ in range(CYCLES):
        head.cycle(idle_s={**{name: IDLE_FOR_AN_HOUR for name in nodes}, its_own: 0.0})
    assert set(head.running()) == {*nodes, its_own}

    # Then its own idles too: it retires it, and only it.
    for _ in range(CYCLES):
        head.cycle(idle_s={name: IDLE_FOR_AN_HOUR for name in (*nodes, its_own)})
    assert set(head.running()) == set(nodes)  # the head and ours stay


def test_scale_up_with_a_cycle_between_head_config_and_group_create_adds_no_extra_vm(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    before = planned("minimal", "v1")
    worker_type = next(
        name for name in before.bootstrap_config["available_node_types"]
        if name != before.yaml.get("head_node_type", before.bootstrap_config["head_node_type"])
    )
    after = planned("minimal", "v1", {worker_type: 1})
    assert not before.groups[0]["count"] and after.groups[0]["count"] == 1
    start_cluster(before, fake)  # the head alone: the group keeps 0

    # `pulumi up` has updated the head's metadata (its watcher rewrote the config) but the
    # group has not created its worker yet: the autoscaler runs in between.
    head = head_for(after)
    for _ in range(CYCLES):
        head.cycle(idle_s={before.head_name: IDLE_FOR_AN_HOUR})
    assert set(head.running()) == {before.head_name}

    ours = create_groups(after, fake)
    for _ in range(CYCLES):
        head.cycle(idle_s={name: IDLE_FOR_AN_HOUR for name in head.running()})
    assert set(head.running()) == {before.head_name, *ours}
    assert len(ours) == 1


# ------------------------------------ spot with on-demand fallback (provider.capacity), v1

SPOT_TYPE = "ray_worker_small"  # the `full` stack's worker type, made spot here
SPOT_MAX = 4


def spot_cluster(fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead],
                 fallback: bool = True) -> Running:
    """`full` with its worker type spot (falling back to on-demand unless `fallback` is
    False) and room for SPOT_MAX workers; its pinned worker made while spot was there."""
    edit = spot_with_fallback(SPOT_TYPE, SPOT_MAX)

    def without_fallback(data: dict[str, Any]) -> None:
        edit(data)
        del data["provider"]["capacity"]

    cluster = planned("full", "v1", edit=edit if fallback else without_fallback)
    return Running(cluster, start_cluster(cluster, fake), head_for(cluster))


def grow(running_up: Running) -> dict[str, dict[str, Any]]:
    """Work for more workers than the cluster may have, for a few cycles: Ray's launches."""
    cluster, nodes, head = running_up.cluster, running_up.nodes, running_up.head
    per_node = cluster.bootstrap_config["available_node_types"][SPOT_TYPE]["resources"]
    for _ in range(CYCLES):
        head.cycle(busy=set(head.running()), demand=[dict(per_node)] * (SPOT_MAX + 3))
    return {n: i for n, i in head.running().items() if n not in nodes}


def launch_failures(head: RayHead) -> list[str]:
    return [line for line in head.autoscaler.event_summarizer.summary()
            if "Failed to launch" in line]


def test_spot_stocked_out_gives_on_demand_workers_labelled_and_counted_once(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    up = spot_cluster(fake, head_for)
    fake.faults.spot_capacity[up.cluster.zone] = 0  # GCE's stockout for every spot insert

    launched = grow(up)

    # As many as spot would have given: each launch made one node, on-demand.
    assert len(launched) == SPOT_MAX - len(up.nodes[1:])
    for name, instance in launched.items():
        assert_on_demand_fallback(instance)
        assert instance["labels"]["ray-user-node-type"] == SPOT_TYPE
        assert up.head.autoscaler.launch_config_ok(name)  # Ray's hash: not outdated
    assert launch_failures(up.head) == []
    # Later cycles keep them and add none: v1 counts each once.
    grow(up)
    assert set(up.head.running()) == {*up.nodes, *launched}


def test_spot_partly_there_gives_spot_first_then_on_demand_for_the_rest(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    up = spot_cluster(fake, head_for)
    fake.faults.spot_capacity[up.cluster.zone] = 1

    launched = grow(up)

    markets = sorted(market_of_instance(i) for i in launched.values())
    assert markets == ["on-demand"] * (SPOT_MAX - len(up.nodes[1:]) - 1) + ["spot"]
    assert {i["labels"]["ray-capacity"] for i in launched.values()} == {"spot", "on-demand"}
    assert launch_failures(up.head) == []


def test_spot_available_gives_spot_workers_as_before(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    up = spot_cluster(fake, head_for)

    launched = grow(up)

    assert len(launched) == SPOT_MAX - len(up.nodes[1:])
    for instance in launched.values():
        assert instance["scheduling"] == {"provisioningModel": "SPOT",
                                          "instanceTerminationAction": "DELETE"}
        assert instance["labels"]["ray-capacity"] == "spot"


def test_a_spot_type_without_the_fallback_stalls_on_a_stockout_as_rays_provider_does(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    """Why the fallback lives in the head's provider: Ray's own launch fails and retries the
    same spot body, cycle after cycle."""
    up = spot_cluster(fake, head_for, fallback=False)
    fake.faults.spot_capacity[up.cluster.zone] = 0

    assert grow(up) == {}
    assert launch_failures(up.head)


# ------------------------------------ the capacity ladder (provider.capacity.<type>.ladder), v1


def test_demand_walks_the_ladder_reservation_then_flex_start_and_retires_every_node(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    cluster = planned_ladder("v1", fake, SPOT_TYPE, SPOT_MAX)
    up = Running(cluster, start_cluster(cluster, fake), head_for(cluster))
    reservation_full_spot_out(cluster, fake, room=1)

    grow(up)  # the flex-start nodes are PENDING meanwhile: Ray counts them, adds none
    time.sleep(FLEX_WAIT_S)
    launched = grow(up)
    assert len(fake.instances(cluster.project, cluster.zone)) == len(up.nodes) + len(launched)

    assert_reserved_then_flex_start(launched, SPOT_MAX - len(up.nodes[1:]))
    for name, instance in launched.items():
        assert up.head.autoscaler.launch_config_ok(name)  # Ray's hash: not outdated
        if instance["labels"]["ray-capacity"] == "flex-start":
            assert instance["scheduling"]["provisioningModel"] == "FLEX_START"
    assert launch_failures(up.head) == []
    grow(up)  # nothing made twice: later cycles add none
    assert set(up.head.running()) == {*up.nodes, *launched}

    for _ in range(CYCLES):
        up.head.cycle(idle_s=idle_an_hour(up.head.running()))
    assert set(up.head.running()) == set(up.nodes)  # none left behind
    fake.cloud.settle()
    assert fake.cloud.reservations.get(cluster.project, cluster.zone, "gpu-res").free == 1


def test_spot_out_at_home_walks_to_the_rungs_other_zone_and_v1_retires_the_nodes_there(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    cluster, nodes = spot_out_at_home("v1", fake, SPOT_TYPE, SPOT_MAX)
    up = Running(cluster, nodes, head_for(cluster))
    launched = grow(up)

    assert launched and launch_failures(up.head) == []
    assert set(launched) == set(fake.instances(cluster.project, OTHER_ZONE))
    for name, instance in launched.items():
        assert market_of_instance(instance) == "spot"
        assert up.head.autoscaler.launch_config_ok(name)  # Ray's hash: not outdated
    grow(up)  # listed across zones: counted once, nothing made twice
    assert set(up.head.running()) == {*up.nodes, *launched}
    for _ in range(CYCLES):
        up.head.cycle(idle_s=idle_an_hour(up.head.running()))
    fake.cloud.settle()
    assert fake.instances(cluster.project, OTHER_ZONE) == {}  # terminated in their own zone


# ------------------------------------ the workers Pulumi pins, counted by v1 (issue 36)


def pinned_up(stack: str, fake: FakeComputeServer,
              head_for: Callable[[Cluster], RayHead]) -> Running:
    """The stack under v1 with one worker Pulumi keeps (ray_cooperation.with_one_pinned)."""
    cluster, nodes = start_with_one_pinned(stack, "v1", fake)
    return Running(cluster, nodes, head_for(cluster))


@pytest.mark.parametrize("stack", PINNED_STACKS)
def test_request_resources_that_fits_on_the_head_and_pinned_worker_launches_nothing(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    run = pinned_up(stack, fake, head_for)

    for _ in range(CYCLES):
        run.head.cycle(idle_s=idle_an_hour(run.nodes), requested=node_bundles(run.cluster, 1))

    assert set(run.head.running()) == set(run.nodes)
    assert run.head.gcs.drained == []


@pytest.mark.parametrize("stack", PINNED_STACKS)
def test_request_resources_needing_one_more_node_launches_exactly_one(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    run = pinned_up(stack, fake, head_for)

    for _ in range(CYCLES):
        run.head.cycle(requested=node_bundles(run.cluster, 2))

    (launched,) = set(run.head.running()) - set(run.nodes)
    assert run.head.running()[launched]["labels"]["ray-user-node-type"] == run.cluster.worker_type


def grow_past_the_maximum(run: Running) -> set[str]:
    """Every node busy and more work waiting than the cluster may ever hold, with
    request_resources asking for the head and the pinned worker: v1's launches."""
    for _ in range(CYCLES):
        run.head.cycle(busy=set(run.head.running()), demand=past_the_maximum(run.cluster),
                       requested=node_bundles(run.cluster, 1))
    return set(run.head.running()) - set(run.nodes)


@pytest.mark.parametrize("stack", PINNED_STACKS)
def test_demand_beyond_max_workers_launches_up_to_the_maximum_counting_the_pinned_worker(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    run = pinned_up(stack, fake, head_for)

    launched = grow_past_the_maximum(run)

    assert len(launched) == most_workers(run.cluster) - 1
    assert set(run.nodes) <= set(run.head.running())


@pytest.mark.parametrize("stack", PINNED_STACKS)
def test_idle_autoscaled_workers_retire_and_the_pinned_worker_never(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    run = pinned_up(stack, fake, head_for)
    launched = grow_past_the_maximum(run)
    assert launched

    for _ in range(CYCLES):
        run.head.cycle(idle_s=idle_an_hour(run.head.running()))

    assert set(run.head.running()) == set(run.nodes)
    assert sorted(run.head.gcs.drained) == sorted(node_id(name) for name in launched)


@pytest.mark.parametrize("stack", PINNED_STACKS)
def test_a_preempted_pinned_worker_is_not_replaced_by_the_autoscaler(
    stack: str, fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead]
) -> None:
    run = pinned_up(stack, fake, head_for)
    run.head.cycle(idle_s=idle_an_hour(run.nodes))
    fake.cloud.preempt(run.cluster.project, run.cluster.zone, run.nodes[1])

    for _ in range(CYCLES):
        run.head.cycle(idle_s=idle_an_hour(run.head.running()))

    assert set(fake.instances(run.cluster.project, run.cluster.zone)) == {run.cluster.head_name}


# ------------------------------------------- the spend cap's launch check (provider.spend_cap)


def test_a_launch_over_the_hourly_cap_is_refused_and_says_why_in_the_log_and_ray_status(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Room for half a worker more: Ray's launch of the next worker is refused, nothing is
    created, and the reason is in the autoscaler's log, its events, `ray status -v` and the
    head's labels."""
    cluster = planned("full", "v1", edit=hourly_cap_with_room(SPOT_TYPE, 0.5))
    head_metadata_files(cluster, tmp_path, monkeypatch)
    up = Running(cluster, start_cluster(cluster, fake), head_for(cluster))
    per_node = cluster.bootstrap_config["available_node_types"][SPOT_TYPE]["resources"]

    with caplog.at_level(logging.WARNING):
        for _ in range(CYCLES):
            up.head.cycle(busy=set(up.head.running()), demand=[dict(per_node)] * 3)

    assert set(up.head.running()) == set(up.nodes)  # nothing created
    assert len(fake.instances(cluster.project, cluster.zone)) == len(up.nodes)
    reason = f"spend cap: launching 1 {SPOT_TYPE} node(s)"
    assert any(reason in r.getMessage() and "max_usd_per_hour" in r.getMessage()
               for r in caplog.records)
    failures = launch_failures(up.head)
    assert failures and all(f"of type {SPOT_TYPE}. (SpendCap): {reason}" in line
                            for line in failures)
    status = up.head.status()
    assert f" {SPOT_TYPE}: SpendCap (latest_attempt: " in status and reason in status
    labels = fake.instances(cluster.project, cluster.zone)[cluster.head_name]["labels"]
    assert labels["ray-spend-refused"] == SPOT_TYPE
    assert labels["ray-spend-refused-at"].endswith("z")


@pytest.mark.parametrize("ladder, refused", [
    ([{"market": "spot"}], False),
    ([{"market": "spot"}, {"market": "flex-start"}], True),
])
def test_a_laddered_launch_is_priced_at_the_dearest_rung_it_may_take(
    ladder: list[dict[str, Any]], refused: bool, fake: FakeComputeServer,
    head_for: Callable[[Cluster], RayHead], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Room for 1.5 spot workers more, less than one on-demand: a ladder that may leave spot
    is priced on-demand and refused; an all-spot ladder goes ahead."""
    capped = hourly_cap_with_room(SPOT_TYPE, 1.5)

    def edit(data: dict[str, Any]) -> None:
        capped(data)
        data["provider"]["capacity"] = {SPOT_TYPE: {"ladder": ladder}}

    cluster = planned("full", "v1", edit=edit)
    head_metadata_files(cluster, tmp_path, monkeypatch)
    up = Running(cluster, start_cluster(cluster, fake), head_for(cluster))
    per_node = cluster.bootstrap_config["available_node_types"][SPOT_TYPE]["resources"]

    up.head.cycle(busy=set(up.head.running()), demand=[dict(per_node)])

    assert bool(launch_failures(up.head)) is refused
    assert len(up.head.running()) == len(up.nodes) + (0 if refused else 1)


def test_a_launch_within_the_hourly_cap_goes_ahead(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = planned("full", "v1", edit=hourly_cap_with_room(SPOT_TYPE, 1.5))
    head_metadata_files(cluster, tmp_path, monkeypatch)
    up = Running(cluster, start_cluster(cluster, fake), head_for(cluster))
    per_node = cluster.bootstrap_config["available_node_types"][SPOT_TYPE]["resources"]

    for _ in range(CYCLES):
        up.head.cycle(busy=set(up.head.running()), demand=[dict(per_node)])

    assert len(set(up.head.running()) - set(up.nodes)) == 1
    assert launch_failures(up.head) == []


def test_after_the_total_cap_stopped_the_workers_no_launch_goes_ahead(
    fake: FakeComputeServer, head_for: Callable[[Cluster], RayHead], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's daemon (bootstrap/autostop.py, as the head runs it from its metadata) finds
    the total cap reached, stops the worker Pulumi keeps and labels the head; Ray's next
    launches are refused for it, and nothing is created."""
    def total_cap(data: dict[str, Any]) -> None:
        data["provider"]["spend_cap"] = {"max_usd_total": 1.0}  # the fake's nodes are old

    cluster = planned("full", "v1", edit=total_cap)
    metadata = head_metadata_files(cluster, tmp_path, monkeypatch)
    up = Running(cluster, start_cluster(cluster, fake), head_for(cluster))
    local_metadata_token(metadata, head_credentials(fake).token)
    (tmp_path / "proc").mkdir()
    daemon_metadata = Metadata(str(metadata))
    daemon = Autostop(daemon_metadata, tmp_path, RayState(f"http://127.0.0.1:{free_port()}"),
                      Cloud(daemon_metadata, f"http://{fake.endpoint}/compute/v1",
                            f"http://{fake.endpoint}/v2"), tmp_path / "proc", 0.01)
    one_check = iter([False, True])
    assert daemon.run(until=lambda: next(one_check)) == up.nodes[1:]
    per_node = cluster.bootstrap_config["available_node_types"][SPOT_TYPE]["resources"]

    for _ in range(CYCLES):
        up.head.cycle(busy=set(up.head.running()), demand=[dict(per_node)] * 3)

    assert set(up.head.running()) == {cluster.head_name}
    assert len(fake.instances(cluster.project, cluster.zone)) == len(up.nodes)
    failures = launch_failures(up.head)
    assert failures and all("(SpendCap): spend cap: the cluster reached provider.spend_cap."
                            "max_usd_total $1.00 and its workers were stopped at " in line
                            for line in failures)


def test_head_carries_the_labels_rays_launcher_gives_a_head() -> None:
    """`ray up` labels the head like this (commands.get_or_create_head_node), and Ray's
    `summary()` skips a node without `ray-node-status`."""
    from ray.autoscaler.tags import (
        NODE_KIND_HEAD,
        STATUS_UP_TO_DATE,
        TAG_RAY_CLUSTER_NAME,
        TAG_RAY_LAUNCH_CONFIG,
        TAG_RAY_NODE_KIND,
        TAG_RAY_NODE_NAME,
        TAG_RAY_NODE_STATUS,
        TAG_RAY_USER_NODE_TYPE,
    )

    cluster = planned("full", "v1")
    (head,) = cluster.run.of_type("gcp:compute/instance:Instance")
    labels = head.inputs["labels"]
    assert labels[TAG_RAY_NODE_KIND] == NODE_KIND_HEAD
    assert labels[TAG_RAY_NODE_STATUS] == STATUS_UP_TO_DATE
    assert labels[TAG_RAY_NODE_NAME] == f"ray-{cluster.yaml['cluster_name']}-head"
    assert labels[TAG_RAY_USER_NODE_TYPE] == cluster.yaml["head_node_type"]
    assert labels[TAG_RAY_CLUSTER_NAME] == cluster.yaml["cluster_name"]
    assert labels[TAG_RAY_LAUNCH_CONFIG]


def test_pulumis_workers_are_a_kind_rays_autoscaler_never_manages() -> None:
    from ray.autoscaler.tags import NODE_KIND_UNMANAGED, STATUS_UP_TO_DATE

    cluster = planned("full", "v1")
    for group in cluster.groups:
        labels = group["body"]["labels"]
        assert labels["ray-node-type"] == NODE_KIND_UNMANAGED
        assert labels["ray-node-status"] == STATUS_UP_TO_DATE
        assert labels["ray-user-node-type"] == group["node_type"]


@pytest.mark.parametrize("stack", ["tpu", "tpu-pod", "tpu-pod-topology"])
def test_pulumis_tpu_slices_are_a_kind_rays_autoscaler_never_manages(stack: str) -> None:
    from ray.autoscaler.tags import NODE_KIND_UNMANAGED, STATUS_UP_TO_DATE

    run = run_program({"ray-gcp:cluster": f"stacks/clusters/{stack}.yaml"}, stack=stack)
    slices = [vm for vm in run.of_type("gcp:tpu/v2Vm:V2Vm")
              if vm.inputs["labels"]["ray-node-type"] != "head"]
    assert slices, f"the {stack} stack keeps a TPU slice"
    for vm in slices:
        assert vm.inputs["labels"]["ray-node-type"] == NODE_KIND_UNMANAGED
        assert vm.inputs["labels"]["ray-node-status"] == STATUS_UP_TO_DATE
