"""What Ray's autoscaler tests (v1 and v2) start from: a shipped stack as the program plans it,
its nodes in the fake Compute API, and Ray's GCP clients pointed at that fake.

The start state is what the program registers under mocks: the head's labels and metadata
(its startup script and `~/ray_bootstrap_config.yaml`), and the worker groups' nodes made by
`WorkerGroupProvider.create` from the group's registered inputs. Only how Ray builds its Google
API clients is replaced, to point them at the fake with the head's credentials (a token for
the head's service account and scopes, as its metadata server gives it), judged by the grants
the program declares (made in the fake by `start_cluster`). The config names
the head's own node provider (`type: external`): Ray's loader imports it from the zip the head's
metadata carries, put on the path as the head's `ray start` gets it (`install_head_provider`).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
import ray.autoscaler._private.gcp.config as ray_gcp_config
import ray.autoscaler._private.providers as ray_providers
import yaml
from google.oauth2.credentials import Credentials
from googleapiclient import discovery

from infra.dynamic_types import WORKER_GROUP_TYPE
from infra.workers import WorkerGroupProvider
from model.config import ClusterConfig, parse_cluster_config
from model.prices import node_type_price
from ops.review.plan_engine import ProgramRun, run_program
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.helpers import FAST_DEADLINES, fast_retry
from tests.support.program_grants import grant_as_planned, programs_head
from tests.support.program_runs import head_config_text, stack_yaml

Version = Literal["v1", "v2"]
IDLE_FOR_AN_HOUR = 3600.0
CYCLES = 3


@dataclass
class Cluster:
    """The program's registrations for one stack, and the pieces of it in the fake cloud."""

    run: ProgramRun
    yaml: dict[str, Any]
    head_name: str
    bootstrap_config: dict[str, Any]
    groups: list[dict[str, Any]] = field(default_factory=list)
    head_metadata: dict[str, str] = field(default_factory=dict)

    @property
    def project(self) -> str:
        return self.yaml["provider"]["project_id"]

    @property
    def zone(self) -> str:
        return self.yaml["provider"]["availability_zone"]

    @property
    def head_type(self) -> str:
        return self.bootstrap_config["head_node_type"]

    @property
    def config(self) -> ClusterConfig:
        """The cluster YAML as the user wrote it (with the test's edit), Ray's defaults
        filled in."""
        return parse_cluster_config(copy.deepcopy(self.yaml))

    @property
    def worker_type(self) -> str:
        return next(name for name in self.config.available_node_types if name != self.head_type)


_PLANNED: dict[str, Cluster] = {}
"""Plans by their whole input (stack, the YAML as edited, worker counts): the program's run
under mocks is most of a cooperation test's set-up (seconds each), and the same plans recur
(several tests start the same edit of a stack)."""


def planned(stack: str, version: Version, worker_counts: dict[str, int] | None = None,
            edit: Callable[[dict[str, Any]], None] | None = None) -> Cluster:
    """The stack's own YAML with `provider.autoscaler_version` set (and `edit` applied),
    planned by the program: once a worker for the same stack, YAML and counts, each caller
    getting its own copy."""
    data = stack_yaml(stack)
    data["provider"]["autoscaler_version"] = version
    if edit is not None:
        edit(data)
    key = json.dumps([stack, data, worker_counts], sort_keys=True)
    if key not in _PLANNED:
        _PLANNED[key] = _planned(stack, data, worker_counts)
    return copy.deepcopy(_PLANNED[key])


def _planned(stack: str, data: dict[str, Any], worker_counts: dict[str, int] | None) -> Cluster:
    config: dict[str, Any] = {"ray-gcp:clusterConfig": json.dumps(data)}
    if worker_counts is not None:
        config["ray-gcp:workerCounts"] = json.dumps(worker_counts)
    run = run_program(config, stack=stack)
    (head,) = run.of_type("gcp:compute/instance:Instance")
    groups = [r.inputs for r in run.of_type(WORKER_GROUP_TYPE)]
    return Cluster(
        run=run,
        yaml=data,
        head_name=head.inputs["name"],
        bootstrap_config=yaml.safe_load(head_config_text(run, head)),
        groups=groups,
        head_metadata=dict(head.inputs["metadata"]),
    )


# Test modules import these two by their function names; pytest knows them by `name`.
@pytest.fixture(name="fake")
def fake_fixture() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


@pytest.fixture(name="ray_apis_at_fake")
def ray_apis_fixture(fake: FakeComputeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's `_create_*` client builders, pointed at the fake; everything else is Ray's."""

    def builder(api: str, version: str, path: str):
        def build(gcp_credentials=None):
            return discovery.build(
                api,
                version,
                credentials=head_credentials(fake),
                requestBuilder=ray_gcp_config.build_request,
                cache_discovery=False,
                static_discovery=True,
                client_options={"api_endpoint": f"http://{fake.endpoint}/{path}"},
            )

        return build

    monkeypatch.setattr(ray_gcp_config, "_create_compute", builder("compute", "v1", "compute/v1/"))
    monkeypatch.setattr(ray_gcp_config, "_create_crm", builder("cloudresourcemanager", "v1", ""))
    monkeypatch.setattr(ray_gcp_config, "_create_iam", builder("iam", "v1", ""))
    # Ray caches one provider per config: each test's fake has its own port.
    monkeypatch.setattr(ray_providers, "_provider_instances", {})


class InlineExecutor:
    """A ThreadPoolExecutor whose work runs in `submit` (for v2's adapter and RayStopper: a
    cycle's launches and drains are done when it returns)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 (a Future carries whatever it raised)
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True) -> None:
        pass


def requested_constraint(bundles: list[dict[str, float]]) -> Any:
    """What the GCS keeps of the last `request_resources(bundles=...)`: one constraint of
    one request per bundle, as v2 reads it."""
    from ray.core.generated.autoscaler_pb2 import (
        ClusterResourceConstraint,
        ResourceRequest,
        ResourceRequestByCount,
    )

    return ClusterResourceConstraint(resource_requests=[ResourceRequestByCount(
        request=ResourceRequest(resources_bundle=bundle), count=1) for bundle in bundles])


# ------------------------------------------------ the workers Pulumi pins, counted (issue 36)

PINNED_STACKS = ["full", "minimal", "gpu-docker"]
ROOM = 3  # max_workers of the cluster and its worker type, where the YAML names the type


_WITH_ONE_PINNED: dict[tuple[str, str], Cluster] = {}


def with_one_pinned(stack: str, version: Version) -> Cluster:
    """The stack with one worker of its worker type Pulumi keeps; where the YAML names its
    worker type, the cluster and that type may have ROOM workers, so that "one more node" and
    "up to the maximum" differ (`minimal` keeps Ray's defaults: two). Planned once a worker
    (two program runs); each caller gets its own copy."""
    if (stack, version) not in _WITH_ONE_PINNED:
        _WITH_ONE_PINNED[(stack, version)] = _with_one_pinned(stack, version)
    return copy.deepcopy(_WITH_ONE_PINNED[(stack, version)])


def _with_one_pinned(stack: str, version: Version) -> Cluster:

    def room(data: dict[str, Any]) -> None:
        types = data.get("available_node_types")
        if not types:
            return
        data["max_workers"] = ROOM
        for name, node_type in types.items():
            if name != data["head_node_type"]:
                node_type["max_workers"] = ROOM

    worker_type = planned(stack, version, edit=room).worker_type
    return planned(stack, version, {worker_type: 1}, edit=room)


def most_workers(cluster: Cluster) -> int:
    """The workers of its worker type the cluster may have, Pulumi's counted: the lower of the
    YAML's `max_workers` and the type's."""
    config = cluster.config
    return min(config.max_workers, config.available_node_types[cluster.worker_type].max_workers)


def start_with_one_pinned(stack: str, version: Version,
                          fake: FakeComputeServer) -> tuple[Cluster, list[str]]:
    """`with_one_pinned` started in the fake cloud: the cluster, and its head and worker."""
    cluster = with_one_pinned(stack, version)
    nodes = start_cluster(cluster, fake)
    assert len(nodes) == 2, nodes
    return cluster, nodes


def idle_an_hour(names: Iterable[str]) -> dict[str, float]:
    return {name: IDLE_FOR_AN_HOUR for name in names}


def past_the_maximum(cluster: Cluster) -> list[dict[str, float]]:
    """Pending work for more workers than the cluster may ever have."""
    return [node_bundles(cluster, 1)[1]] * (most_workers(cluster) + 3)


def node_bundles(cluster: Cluster, workers: int) -> list[dict[str, float]]:
    """`request_resources(bundles=...)` for the head's resources and `workers` workers' of
    the worker type, one bundle per node."""
    types = cluster.config.available_node_types
    return [dict(types[cluster.head_type].resources),
            *[dict(types[cluster.worker_type].resources) for _ in range(workers)]]


# A test's head without a planned cluster (`as_the_programs_head`), by fake.
_HEADS: weakref.WeakKeyDictionary[FakeComputeServer, dict[str, Any]] = (
    weakref.WeakKeyDictionary())


def as_the_programs_head(fake: FakeComputeServer, project: str) -> None:
    """For a test with no planned cluster: Ray's clients run as the head the program makes
    (tests/support/program_grants.py `programs_head`)."""
    _HEADS[fake] = programs_head(fake, project)


def head_credentials(fake: FakeComputeServer) -> Credentials:
    """What Ray's clients on the head get from google.auth: a token of the head's service
    account, with the head's scopes (the head `start_cluster` put in the fake, else
    `as_the_programs_head`'s)."""
    with fake.cloud.lock:
        accounts = [i["serviceAccounts"][0] for instances in fake.cloud.instances.values()
                    for i in instances.values()
                    if (i.get("labels") or {}).get("ray-node-type") == "head"
                    and i.get("serviceAccounts")]
    account = accounts[0] if accounts else _HEADS.get(fake)
    if account is None:
        raise AssertionError("no head in the fake: start_cluster or as_the_programs_head first")
    return Credentials(token=fake.vm_token(account["email"], account["scopes"]))


def spot_with_fallback(worker_type: str, max_workers: int) -> Callable[[dict[str, Any]], None]:
    """An edit for `planned`: the worker type asks for spot and falls back to on-demand
    (`provider.capacity`), and the cluster and the type may grow to `max_workers`."""

    def edit(data: dict[str, Any]) -> None:
        node_type = data["available_node_types"][worker_type]
        node_type["node_config"]["scheduling"] = {"provisioningModel": "SPOT",
                                                  "instanceTerminationAction": "DELETE"}
        node_type["max_workers"] = data["max_workers"] = max_workers
        data["provider"]["capacity"] = {worker_type: {"fallback": "on-demand"}}

    return edit


LADDER_RESERVATION = "gpu-res"
FLEX_WAIT_S = 1.0


def ladder_of_markets(worker_type: str, max_workers: int) -> Callable[[dict[str, Any]], None]:
    """An edit for `planned`: the worker type's capacity ladder is a specific reservation,
    spot, flex-start (2 hours), on-demand; the cluster and the type may grow to
    `max_workers`."""

    def edit(data: dict[str, Any]) -> None:
        spot_with_fallback(worker_type, max_workers)(data)
        data["provider"]["capacity"] = {worker_type: {"ladder": [
            {"market": "reservation", "reservations": [LADDER_RESERVATION]},
            {"market": "spot"},
            {"market": "flex-start", "max_run_duration_hours": 2},
            {"market": "on-demand"}]}}

    return edit


OTHER_ZONE = "us-west1-b"  # the `full` stack's region's other zone


def spot_in_two_zones(worker_type: str, max_workers: int) -> Callable[[dict[str, Any]], None]:
    """An edit for `planned`: the worker type's ladder is spot in the stack's zone, then spot in
    OTHER_ZONE, then on-demand."""

    def edit(data: dict[str, Any]) -> None:
        spot_with_fallback(worker_type, max_workers)(data)
        home = data["provider"]["availability_zone"]
        data["provider"]["capacity"] = {worker_type: {"ladder": [
            {"market": "spot", "zones": [home, OTHER_ZONE]}, {"market": "on-demand"}]}}

    return edit


def spot_out_at_home(version: Version, fake: FakeComputeServer, worker_type: str,
                     max_workers: int) -> tuple[Cluster, list[str]]:
    """`full` with the ladder of `spot_in_two_zones`, started, and spot stocked out in the
    stack's zone (there in OTHER_ZONE): the cluster and its nodes."""
    cluster = planned("full", version, edit=spot_in_two_zones(worker_type, max_workers))
    nodes = start_cluster(cluster, fake)
    fake.faults.spot_capacity[cluster.zone] = 0
    return cluster, nodes


def planned_ladder(version: Version, fake: FakeComputeServer, worker_type: str,
                   max_workers: int) -> Cluster:
    """`full` with the ladder of `ladder_of_markets`, planned, and its reservation (of the
    worker's shape) full, so the pinned workers go spot."""
    cluster = planned("full", version, edit=ladder_of_markets(worker_type, max_workers))
    fake.cloud.reservations.add(cluster.project, cluster.zone, LADDER_RESERVATION, 0,
                                "n1-standard-2")
    return cluster


def assert_reserved_then_flex_start(launched: dict[str, dict[str, Any]], wanted: int) -> None:
    """`wanted` autoscaled nodes: one from the reservation's one free place, the rest
    flex-start (spot being out), each labelled with its rung."""
    labels = sorted(i["labels"]["ray-capacity"] for i in launched.values())
    assert labels == ["flex-start"] * (wanted - 1) + ["reservation"]


def reservation_full_spot_out(cluster: Cluster, fake: FakeComputeServer, room: int) -> None:
    """After the pinned workers are up: the ladder's reservation has `room` nodes left, spot
    is stocked out, a flex-start node is PENDING for FLEX_WAIT_S before it runs."""
    fake.cloud.reservations.get(cluster.project, cluster.zone, LADDER_RESERVATION).count = room
    fake.faults.spot_capacity[cluster.zone] = 0
    fake.faults.flex_start_s = FLEX_WAIT_S


def market_of_instance(instance: dict[str, Any]) -> str:
    """What GCE made: `spot` or `on-demand`, by the instance's own scheduling."""
    scheduling = instance.get("scheduling") or {}
    spot = scheduling.get("preemptible") or scheduling.get("provisioningModel") == "SPOT"
    return "spot" if spot else "on-demand"


def assert_on_demand_fallback(instance: dict[str, Any]) -> None:
    """A spot type's node the head's provider made on-demand: on-demand by its own scheduling
    (spot-only fields gone), and labelled so."""
    scheduling, labels = instance.get("scheduling"), instance["labels"]
    assert market_of_instance(instance) == "on-demand", scheduling
    assert labels.get("ray-capacity") == "on-demand", labels
    assert scheduling == {"provisioningModel": "STANDARD"}, scheduling


def autoscaler_launch(provider_config: dict[str, Any], cluster_name: str, node_type: str,
                      body: dict[str, Any], count: int,
                      checks: tuple[Callable[..., None], ...] = ()) -> dict[str, Any]:
    """A launch as the head's autoscaler makes it (Ray's NodeLauncher tags) through the head's
    provider with `checks` added to its launch checks, with Ray's clients as
    `ray_apis_at_fake` points them."""
    from ray.autoscaler.tags import (
        NODE_KIND_WORKER,
        STATUS_UNINITIALIZED,
        TAG_RAY_LAUNCH_CONFIG,
        TAG_RAY_NODE_KIND,
        TAG_RAY_NODE_NAME,
        TAG_RAY_NODE_STATUS,
        TAG_RAY_USER_NODE_TYPE,
    )

    from bootstrap.head_provider.provider import HeadNodeProvider

    tags = {TAG_RAY_NODE_NAME: f"ray-{cluster_name}-worker", TAG_RAY_NODE_KIND: NODE_KIND_WORKER,
            TAG_RAY_NODE_STATUS: STATUS_UNINITIALIZED,
            TAG_RAY_LAUNCH_CONFIG: hashlib.sha1(json.dumps(body).encode()).hexdigest(),
            TAG_RAY_USER_NODE_TYPE: node_type}
    provider = HeadNodeProvider(provider_config, cluster_name)
    provider.launch_checks += checks
    return provider.create_node(body, tags, count)


def hourly_cap_with_room(worker_type: str, room: float) -> Callable[[dict[str, Any]], None]:
    """An edit for `planned`: `provider.spend_cap.max_usd_per_hour` at what the head and the
    pinned workers (`min_workers` of the type) cost an hour by the price table, plus `room`
    times one more worker of the type."""

    def edit(data: dict[str, Any]) -> None:
        config = parse_cluster_config(copy.deepcopy(data))
        region = config.provider.region
        worker_type_config = config.available_node_types[worker_type]
        worker = node_type_price(worker_type_config, region).running
        pinned = node_type_price(config.head_type, region).running + (
            worker * (worker_type_config.min_workers or 0))
        data["provider"]["spend_cap"] = {"max_usd_per_hour": round(pinned + room * worker, 4)}

    return edit


def head_metadata_files(cluster: Cluster, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The head's metadata values as the metadata server would serve them to its processes
    (one file each, the local mode of bootstrap/head_provider/instance_metadata.py)."""
    folder = home / "metadata"
    folder.mkdir(exist_ok=True)
    for key, value in cluster.head_metadata.items():
        (folder / key).write_text(value)
    monkeypatch.setenv("RAY_BOOTSTRAP_METADATA_DIR", str(folder))
    return folder


SHIPPED_PROVIDER = "ray_gcp_head_provider"


def install_head_provider(cluster: Cluster, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The head's node provider as its startup script installs it: metadata
    `ray-head-provider` decoded to `~/ray_head_provider.zip`, that file first on the path (a
    fresh import: nothing loaded by an earlier test is reused)."""
    archive = home / "ray_head_provider.zip"
    archive.write_bytes(base64.b64decode(cluster.head_metadata["ray-head-provider"]))
    for name in [m for m in sys.modules if m.split(".")[0] == SHIPPED_PROVIDER]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(archive))
    return archive


def start_cluster(cluster: Cluster, fake: FakeComputeServer) -> list[str]:
    """The program's IAM grants, the head as the program declares it (labels, metadata and
    service account), and each worker group's nodes; their names."""
    grant_as_planned(cluster.run, fake)
    head = next(r for r in cluster.run.of_type("gcp:compute/instance:Instance"))
    # The fake's region has only its `-a` zone unless told (the gpu-docker stack is in `-b`).
    fake.cloud.catalogue.zones.setdefault(cluster.yaml["provider"]["region"], [cluster.zone])
    fake.cloud.add_foreign_instance(
        cluster.project, cluster.zone, cluster.head_name, head.inputs["labels"],
        metadata=head.inputs["metadata"],
        machine_type=head.inputs["machineType"].rsplit("/", 1)[-1],
        service_account=head.inputs["serviceAccount"],
    )
    return [cluster.head_name, *create_groups(cluster, fake)]


def create_groups(cluster: Cluster, fake: FakeComputeServer) -> list[str]:
    provider = WorkerGroupProvider(retry=fast_retry(), deadlines=FAST_DEADLINES)
    names: list[str] = []
    for inputs in cluster.groups:
        props = {**inputs, "api_endpoint": fake.endpoint, "credentials": None}
        names += provider.create(props).outs["instance_names"]
    return names


def running(cluster: Cluster, fake: FakeComputeServer) -> dict[str, dict[str, Any]]:
    """The project's RUNNING instances in every zone (a ladder's rung may be in another)."""
    with fake.cloud.lock:
        zones = [zone for project, zone in fake.cloud.instances if project == cluster.project]
    instances = {name: i for zone in zones
                 for name, i in fake.instances(cluster.project, zone).items()}
    return {name: i for name, i in instances.items() if i["status"] == "RUNNING"}


def node_id(name: str) -> bytes:
    """A Ray node id (28 bytes) per instance name."""
    return hashlib.sha256(name.encode()).digest()[:28]


def ip_of(instance: dict[str, Any]) -> str:
    return instance["networkInterfaces"][0]["networkIP"]


def active_lines(status: str) -> list[str]:
    section = status.split("Active:\n", 1)[1].split("\nPending:", 1)[0]
    return [line.strip() for line in section.splitlines()]
