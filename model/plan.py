"""The node plan: what each node group of the cluster is, as plain data.

ClusterConfig -> ClusterPlan is pure (no pulumi): tests, `invoke plan` and the resource code
all read the same plan. Values only known at deploy time (the discovered subnet, the SSH key,
the launch hash) are filled in by the resource code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from model.adoption import Adoption
from model.config import ClusterConfig, ComputeNodeConfig, ConfigError, TpuNodeConfig
from model.identities import (
    NodeIdentity,
    Role,
    check_identities,
    head_grants,
    node_account,
    node_reads,
    worker_account_email,
)
from model.labels import identity_labels, ray_labels, short_hash

WORKER_COUNTS_KEY = "ray-gcp:workerCounts"


@dataclass(frozen=True)
class NodeGroupPlan:
    """One node type in one role: the head (count 1) or a group of workers."""

    node_type: str
    role: Role
    count: int
    min_workers: int
    max_workers: int
    labels: dict[str, str]
    node_config: ComputeNodeConfig | TpuNodeConfig
    resources: dict[str, int | float]
    external_ip: bool
    network_tags: tuple[str, ...]
    service_account_email: str
    service_account_scopes: tuple[str, ...]
    account_from_node_config: bool
    """The node_config names the account (else it is the cluster's head or worker account)."""

    @property
    def kind(self) -> Literal["compute", "tpu"]:
        return "tpu" if isinstance(self.node_config, TpuNodeConfig) else "compute"

    @property
    def name_prefix(self) -> str:
        return self.labels["ray-node-name"]

    @property
    def instance_name(self) -> str:
        """`<ray-node-name>-<8 hex>-compute|tpu`, the hex derived from the node's config."""
        digest = short_hash([identity_labels(self.labels), self.node_config.body()])
        return f"{self.name_prefix}-{digest}-{self.kind}"

    def node_name(self, index: int) -> str:
        """The name of the group's `index`-th node that Pulumi keeps as its own resource (a
        TPU slice): stable for the same config and index, so a count change adds or removes
        only the highest indices, and a config change renames every one."""
        digest = short_hash([self.labels, self.node_config.body(), index])
        return f"{self.name_prefix}-{digest}-{self.kind}"


@dataclass(frozen=True)
class FirewallPlan:
    """Ray's ports (GCS 6379, object manager 8076, dashboard 8265 and the wide worker range)
    open only between nodes with the cluster's tag; SSH to the head from the given ranges."""

    cluster_tag: str
    head_tag: str
    ssh_source_ranges: tuple[str, ...]
    cloud_nat: bool = False
    """The stack gives the cluster's subnet a Cloud NAT (private mode: no node has a public
    address, yet `pip install` in setup_commands must reach PyPI)."""


@dataclass(frozen=True)
class ClusterPlan:
    """The head, the worker groups Pulumi keeps at a count, and every node type in the
    worker role (what the head's autoscaler may launch, written to its bootstrap config)."""

    config: ClusterConfig
    head: NodeGroupPlan
    workers: list[NodeGroupPlan]
    node_types: dict[str, NodeGroupPlan]
    firewall: FirewallPlan

    @property
    def project(self) -> str:
        return self.config.provider.project

    @property
    def zone(self) -> str:
        return self.config.provider.availability_zone

    @property
    def region(self) -> str:
        return self.config.provider.region

    @property
    def worker_account_email(self) -> str:
        """The cluster's own worker account (model.identities), made with the stack."""
        return worker_account_email(self.config)

    @property
    def worker_accounts(self) -> list[str]:
        """Every account a worker-role node runs as: the head launches workers as each."""
        return sorted({group.service_account_email for group in self.node_types.values()})

    @property
    def identities(self) -> list[NodeIdentity]:
        """Per node role and account: its scopes and every grant it holds (model.identities).
        The head's first."""
        found: dict[tuple[str, str], list[NodeGroupPlan]] = {}
        for group in [self.head, *self.node_types.values()]:
            found.setdefault((group.role, group.service_account_email), []).append(group)
        return [
            NodeIdentity(
                role=groups[0].role,
                node_types=tuple(group.node_type for group in groups),
                email=groups[0].service_account_email,
                scopes=groups[0].service_account_scopes,
                grants=head_grants(self.config, self.worker_accounts)
                if groups[0].role == "head" else node_reads(self.config),
                named_by_node_config=groups[0].account_from_node_config,
            )
            for groups in found.values()
        ]

    @property
    def identity_warnings(self) -> list[str]:
        return check_identities(self.identities)


def resolve_worker_counts(
    config: ClusterConfig, overrides: Mapping[str, object] | None,
    adoption: Adoption | None = None,
) -> dict[str, int]:
    """Each worker type's desired count: `min_workers`, or the stack's `workerCounts` entry,
    which must name a worker type and lie within its [min_workers, max_workers]. A stack that
    adopted a `ray up` cluster (`adoption`) pins by default only the workers its adoption took
    (model/adoption.py: none, since the head keeps `ray up`'s autoscaler, which keeps
    `min_workers` itself), and a count of its may be anything up to max_workers."""
    counts = {name: len(adoption.pinned.get(name, ())) if adoption else t.min_workers
              for name, t in config.worker_types.items()}
    problems: list[tuple[str, str]] = []
    for name, raw in (overrides or {}).items():
        path = f"{WORKER_COUNTS_KEY}.{name}"
        if name not in counts:
            known = ", ".join(sorted(counts)) or "none"
            problems.append((path, f"{name!r} is not a worker node type: use one of {known}"))
            continue
        node_type = config.available_node_types[name]
        whole = (isinstance(raw, int) and not isinstance(raw, bool)) or \
            (isinstance(raw, float) and raw.is_integer())
        value = int(raw) if whole else None
        low, high = 0 if adoption else node_type.min_workers, node_type.max_workers or 0
        if value is None or not low <= value <= high:
            what = f"is outside {name}'s range" if whole else "is not a whole number"
            problems.append((path, f"{raw!r} {what}: set a whole number from "
                                   f"{'0' if adoption else f'min_workers {low}'} to "
                                   f"max_workers {high}"))
            continue
        counts[name] = value
    if sum(counts.values()) > config.max_workers:
        problems.append(
            (
                WORKER_COUNTS_KEY,
                f"{sum(counts.values())} workers exceed the "
                f"cluster's max_workers ({config.max_workers}): lower a count",
            )
        )
    if problems:
        raise ConfigError(problems)
    return counts


def subnet_preference(name: str) -> tuple[bool, str]:
    """Sort key of the region's subnets when the YAML names none: Ray takes the first; we
    prefer `default`, then the first by name, so the choice is stable between runs."""
    return (name != "default", name)


def plan_cluster(
    config: ClusterConfig, worker_counts: Mapping[str, object] | None = None,
    adoption: Adoption | None = None,
) -> ClusterPlan:
    counts = resolve_worker_counts(config, worker_counts, adoption)
    cluster_tag = f"ray-{config.cluster_name}"
    firewall = FirewallPlan(
        cluster_tag=cluster_tag,
        head_tag=f"{cluster_tag}-head",
        ssh_source_ranges=tuple(config.provider.ssh_ranges),
        cloud_nat=bool(config.provider.private_cluster)
        and not config.provider.private_cluster.existing_cloud_nat,
    )
    head = _group(config, "head", config.head_node_type, 1, firewall)
    node_types = {
        name: _group(config, "worker", name, counts.get(name, 0), firewall)
        for name in sorted(config.available_node_types)
    }
    workers = [node_types[name] for name in sorted(config.worker_types)]
    return ClusterPlan(
        config=config, head=head, workers=workers, node_types=node_types, firewall=firewall
    )


def _group(
    config: ClusterConfig, role: Role, node_type: str, count: int, firewall: FirewallPlan
) -> NodeGroupPlan:
    spec = config.available_node_types[node_type]
    node_config = spec.node_config
    labels = {**node_config.labels, **ray_labels(config.cluster_name, role, node_type)}
    tags = (firewall.cluster_tag, *([firewall.head_tag] if role == "head" else ()))
    email, scopes, named = node_account(config, role, node_config)
    return NodeGroupPlan(
        node_type=node_type,
        role=role,
        count=count,
        min_workers=spec.min_workers,
        max_workers=spec.max_workers or 0,
        labels=labels,
        node_config=node_config,
        resources=dict(spec.resources),
        external_ip=not (config.provider.use_internal_ips or config.provider.private_cluster),
        network_tags=tuple(dict.fromkeys([*node_config.tags, *tags])),
        service_account_email=email,
        service_account_scopes=scopes,
        account_from_node_config=named,
    )


def check_boot_disks(plan: ClusterPlan) -> None:
    """Every GCE instance needs a boot disk; without one pulumi-gcp (or GCE) refuses it."""
    problems = [
        (f"available_node_types.{group.node_type}.node_config.disks",
         "a GCE instance needs a boot disk: add one, e.g. `- {boot: true, autoDelete: true, "
         "initializeParams: {diskSizeGb: 50, sourceImage: projects/ubuntu-os-cloud/global/"
         "images/family/ubuntu-2204-lts}}`")
        for group in plan.node_types.values()
        if isinstance(group.node_config, ComputeNodeConfig) and group.node_config.boot_disk is None
    ]
    if problems:
        raise ConfigError(problems)
