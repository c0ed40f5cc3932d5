"""`invoke preflight`: the whole cluster at its largest (the head plus every worker type at its
`max_workers`) against the region's Compute quotas, as a table. Reads only: nothing is created.

The same arithmetic as each WorkerGroup's pre-flight before it inserts (infra/workers/quota.py);
this one answers before the first `up`, for the most the autoscaler may ever ask for.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from infra.config import ClusterConfig, ComputeNodeConfig
from infra.workers.clients import ApiClients, build_credentials
from infra.workers.quota import (
    QuotaReader,
    QuotaRow,
    body_needs,
    quota_request_url,
    quota_rows,
)
from infra.workers.retry import RetryPolicy


@dataclass(frozen=True)
class PreflightReport:
    project: str
    region: str
    rows: list[QuotaRow]
    users: dict[str, list[str]]
    """metric -> which nodes need it, e.g. ["head", "4 x ray_worker_small"]."""
    unchecked: list[str]
    """Node types whose quota this check cannot see (TPU types: the TPU API's quotas)."""

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


def preflight(
    config: ClusterConfig, api_endpoint: str | None = None, retry: RetryPolicy | None = None
) -> PreflightReport:
    provider = config.provider
    secret = provider.gcp_credentials
    credentials = build_credentials(
        secret.credentials.get_secret_value() if secret else None, api_endpoint
    )
    reader = QuotaReader(
        provider.project, ApiClients(credentials, api_endpoint), retry or RetryPolicy()
    )
    quotas = reader.region_quotas(provider.region)
    totals: Counter = Counter()
    users: dict[str, list[str]] = {}
    unchecked: list[str] = []
    for label, node_type, count in largest_cluster(config):
        node_config = config.available_node_types[node_type].node_config
        if not isinstance(node_config, ComputeNodeConfig):
            unchecked.append(node_type)
            continue
        body = node_config.body()
        cpus = reader.guest_cpus(provider.availability_zone, node_config.machine_type)
        for metric, amount in body_needs(body, count, cpus, quotas).items():
            totals[metric] += amount
            users.setdefault(metric, []).append(label)
    return PreflightReport(
        provider.project, provider.region, quota_rows(totals, quotas), users, unchecked
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
                ("SHORT" if row.short else "ok") if listed else "not listed",
                ", ".join(report.users.get(row.metric, [])),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        f"quota check for the largest cluster in region {report.region} of project "
        f"{report.project} (head + every worker type at max_workers; nothing created):",
        *("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows),
    ]
    if report.unchecked:
        lines.append(
            f"not checked: TPU types {', '.join(report.unchecked)} (their quota is the TPU "
            "API's, not Compute's)"
        )
    if report.short:
        lines.append(
            f"{len(report.short)} quota(s) short: request more at "
            f"{quota_request_url(report.project)}, or lower max_workers"
        )
    return "\n".join(lines)


def _num(value: float | None) -> str:
    value = value or 0.0
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
