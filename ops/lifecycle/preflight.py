"""`invoke preflight`: the whole cluster at its largest (the head plus every worker type at its
`max_workers`) against the region's Compute quotas and the zone's Cloud TPU quotas, as a table,
after asking the live APIs whether the zone offers each machine, GPU and TPU type (the config
model checked the names offline against the shipped catalog). Reads only: nothing is created.

The same arithmetic as each WorkerGroup's pre-flight before it inserts (infra/workers/quota.py)
and as the TPU check `invoke up` runs at the size Pulumi keeps (up_quota.py); this one
answers before the first `up`, for the most the autoscaler may ever ask for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infra.workers.clients import ApiClients
from infra.workers.quota import (
    QuotaReader,
    QuotaRow,
    body_needs,
    quota_request_url,
    quota_rows,
)
from infra.workers.retry import RetryPolicy, call_with_retry
from infra.workers.service_usage import QuotaUnreadable, consumer_quota_metrics
from infra.workers.tpu_quota import (
    TPU_SERVICE,
    Model,
    TpuQuotaKey,
    model_of,
    slice_need,
    tpu_quota_rows,
    zone_usage,
)
from infra.workers.zones import bare
from model.config import ClusterConfig, ComputeNodeConfig, TpuNodeConfig
from ops.lifecycle.apis import QuotaApis, quota_apis
from ops.lifecycle.network_check import network_warnings, render_warnings
from ops.lifecycle.preflight_reservations import reservation_lines
from ops.stacks.stack import Stack


@dataclass(frozen=True)
class PreflightReport:
    project: str
    region: str
    rows: list[QuotaRow]
    users: dict[str, list[str]]
    """metric -> which nodes need it, e.g. ["head", "4 x ray_worker_small"]."""
    zone: str = ""
    tpu_checked: bool = False
    unchecked: list[str] = field(default_factory=list)
    """TPU node types of a generation this check does not know."""
    unoffered: list[str] = field(default_factory=list)
    """What the zone does not offer, as the live API says: "machine type X (node_type)"."""

    @property
    def short(self) -> list[QuotaRow]:
        return [row for row in self.rows if row.short]


def largest_cluster(config: ClusterConfig) -> list[tuple[str, str, int]]:
    """(label, node type, count): the head, then each worker type at its max_workers."""
    nodes = [("head", config.head_node_type, 1)]
    for name in sorted(config.worker_types):
        count = config.available_node_types[name].max_workers or 0
        if count:
            nodes.append((f"{count} x {name}", name, count))
    return nodes


def kept_cluster(config: ClusterConfig, counts: Mapping[str, int]) -> list[tuple[str, str, int]]:
    """(label, node type, count): the head, then each worker type at the count Pulumi keeps
    (what an `up` creates; Ray's autoscaler adds the rest later)."""
    nodes = [("head", config.head_node_type, 1)]
    nodes += [(f"{count} x {name}", name, count) for name, count in sorted(counts.items()) if count]
    return nodes


def tpu_quota_check(
    config: ClusterConfig, nodes: list[tuple[str, str, int]], apis: QuotaApis
) -> tuple[list[QuotaRow], dict[str, list[str]], list[str]]:
    """The TPU rows for the TPU node types among `nodes`, which nodes need each, and the TPU
    types of a generation this check does not know."""
    needs: Counter = Counter()
    users: dict[TpuQuotaKey, list[str]] = {}
    unchecked: list[str] = []
    for label, node_type, count in nodes:
        node_config = config.available_node_types[node_type].node_config
        if not isinstance(node_config, TpuNodeConfig):
            continue
        need = slice_need(node_config.tpu_type_name, _tpu_model(node_config))
        if need is None:
            unchecked.append(node_type)
            continue
        needs[need[0]] += need[1] * count
        users.setdefault(need[0], []).append(label)
    if not needs:
        return [], {}, unchecked
    project, zone = config.provider.project, config.provider.availability_zone
    rows = tpu_quota_rows(
        needs, zone, _tpu_limits(project, apis.credentials, apis.endpoint),
        _tpu_usage(apis.clients, project, zone, config.cluster_name, apis.retry),
    )
    return list(rows.values()), {row.metric: users[key] for key, row in rows.items()}, unchecked


def unoffered_types(config: ClusterConfig, apis: QuotaApis) -> dict[str, list[str]]:
    """Node type -> the machine, GPU and TPU types of it that the zone does not offer, asked
    of the live Compute and TPU APIs (the offline catalog cannot know a zone's stock)."""
    from google.api_core.exceptions import NotFound

    project, zone = config.provider.project, config.provider.availability_zone
    clients, found = apis.clients, {}
    for name, node_type in sorted(config.available_node_types.items()):
        node_config = node_type.node_config
        asks: list[tuple[str, Any]] = []
        if isinstance(node_config, TpuNodeConfig):
            if node_config.accelerator_type:
                path = f"projects/{project}/locations/{zone}/acceleratorTypes/" \
                       f"{node_config.accelerator_type}"
                asks.append((f"TPU type {node_config.accelerator_type}",
                             lambda path=path: clients.tpu.get_accelerator_type(name=path,
                                                                                retry=None)))
        else:
            machine = bare(node_config.machine_type)
            asks.append((f"machine type {machine}", lambda machine=machine: (
                clients.compute.call("machineTypes.get", project=project, zone=zone,
                                     machineType=machine))))
            for gpu in {bare(a.accelerator_type) for a in node_config.guest_accelerators}:
                asks.append((f"GPU {gpu}", lambda gpu=gpu: clients.compute.call(
                    "acceleratorTypes.get", project=project, zone=zone, acceleratorType=gpu)))
        for what, ask in asks:
            try:
                call_with_retry(ask, apis.retry)
            except NotFound:
                found.setdefault(name, []).append(what)
    return found


def preflight(
    config: ClusterConfig, api_endpoint: str | None = None, retry: RetryPolicy | None = None
) -> PreflightReport:
    provider = config.provider
    apis = quota_apis(config, api_endpoint, retry)
    unoffered = unoffered_types(config, apis)
    reader = QuotaReader(provider.project, apis.clients, apis.retry)
    quotas = reader.region_quotas(provider.region)
    totals: Counter = Counter()
    users: dict[str, list[str]] = {}
    nodes = [node for node in largest_cluster(config) if node[1] not in unoffered]
    tpu_rows, tpu_users, unchecked = tpu_quota_check(config, nodes, apis)
    for label, node_type, count in nodes:
        node_config = config.available_node_types[node_type].node_config
        if isinstance(node_config, TpuNodeConfig):
            continue
        if not isinstance(node_config, ComputeNodeConfig):
            unchecked.append(node_type)
            continue
        body = node_config.body()
        cpus = reader.guest_cpus(provider.availability_zone, node_config.machine_type)
        for metric, amount in body_needs(body, count, cpus, quotas).items():
            totals[metric] += amount
            users.setdefault(metric, []).append(label)
    rows = quota_rows(totals, quotas) + tpu_rows
    users.update(tpu_users)
    return PreflightReport(
        provider.project, provider.region, rows, users, provider.availability_zone,
        bool(tpu_rows), unchecked,
        [f"{what} ({node_type})" for node_type, whats in unoffered.items() for what in whats],
    )


def _tpu_model(node_config: TpuNodeConfig) -> Model:
    scheduling = node_config.scheduling_config
    return model_of(scheduling.model_dump(exclude_none=True) if scheduling else None)


def _tpu_limits(
    project: str, credentials: Any, api_endpoint: str | None
) -> list[dict[str, Any]] | str:
    """The TPU service's quota metrics, or why they cannot be read."""
    try:
        return consumer_quota_metrics(project, TPU_SERVICE, credentials, api_endpoint)
    except QuotaUnreadable as exc:
        return str(exc)


def _tpu_usage(
    clients: ApiClients, project: str, zone: str, cluster_name: str, retry: RetryPolicy
) -> Counter | str:
    """What the zone's other TPU nodes hold, or why the TPU API could not say."""
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError
    from google.cloud import tpu_v2
    from requests import RequestException

    parent = f"projects/{project}/locations/{zone}"
    try:
        listed = call_with_retry(
            lambda: list(clients.tpu.list_nodes(parent=parent, retry=None)), retry
        )
    except (GoogleAPIError, GoogleAuthError, RequestException) as exc:
        return f"the TPU API did not list the zone's nodes ({exc})"
    return zone_usage(
        (tpu_v2.Node.to_dict(node, use_integers_for_enums=False,
                            preserving_proto_field_name=False) for node in listed),
        cluster_name,
    )


def render(report: PreflightReport) -> str:
    header = ("QUOTA", "NEEDED", "FREE", "LIMIT", "IN USE", "STATUS", "FOR")
    rows = [header]
    for row in report.rows:
        listed = row.limit is not None
        rows.append(
            (
                row.metric,
                _num(row.needed),
                _num(row.free) if listed else "-",
                _num(row.limit) if listed else "-",
                _num(row.usage) if listed else "-",
                ("SHORT" if row.short else "ok") if listed else (row.note or "not listed"),
                ", ".join(report.users.get(row.metric, [])),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        f"quota check for the largest cluster in region {report.region} of project "
        f"{report.project} (head + every worker type at max_workers; nothing created):",
        *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows),
    ]
    lines += [f"{row.metric}: {row.note}: {row.why}" for row in report.rows if row.why]
    if report.unchecked:
        lines.append(
            f"not checked: TPU types {', '.join(report.unchecked)} (a TPU generation this "
            "check does not know)"
        )
    if report.unoffered:
        lines.append(
            f"zone {report.zone} does not offer {', '.join(report.unoffered)} (the live API "
            "says so; those node types are left out of the quota check): pick a zone that "
            "offers them (`gcloud compute machine-types list` / `accelerator-types list` / "
            "`gcloud compute tpus accelerator-types list`) or other types"
        )
    if report.tpu_checked:
        lines.append(
            f"TPU quotas: zone {report.zone}'s limits of service {TPU_SERVICE} (`gcloud alpha "
            f"services quota list --service={TPU_SERVICE} --consumer=projects/"
            f"{report.project}`), in use by the zone's TPU nodes"
        )
    if report.short:
        lines.append(
            f"{len(report.short)} quota(s) short: request more at "
            f"{quota_request_url(report.project)} (filter by the quota's name and location), "
            "or lower max_workers"
        )
    return "\n".join(lines)


def _num(value: float | None) -> str:
    value = value or 0.0
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def preflight_stack(stack: str | None) -> bool:
    """`invoke preflight`: print the quota table for the stack's largest cluster; whether a
    quota is short."""
    chosen = Stack.choose(stack, require_file=True)
    config = chosen.cluster
    report = preflight(config)
    print(render(report))
    apis = quota_apis(config, None, None)
    found = network_warnings(config, apis)
    if found:
        print(render_warnings(found))
    for line in reservation_lines(config, chosen.worker_counts, apis):
        print(line)
    return bool(report.short or report.unoffered)
