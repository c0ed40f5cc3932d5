"""`invoke cost`: what a stack's cluster costs, from the price table and the nodes' own
timestamps (Compute API `creationTimestamp`, `lastStartTimestamp`, `lastStopTimestamp`; TPU
`createTime`), read with the user's credentials like `pulumi up`. Each instance is priced at
the market it really got (spot, or on-demand as a spot type's capacity fallback creates it),
wherever in the region it lives.

Hours run and what they cost: `bootstrap.head_provider.spend` (the head's spend cap counts by
the same rule).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date, datetime, timezone

from bootstrap.head_provider.spend import RUNNING_STATES, Rate, hours_run, parse_time
from infra.workers.capacity import SPOT
from infra.workers.retry import RetryPolicy
from model.config import ClusterConfig
from model.labels import CLUSTER_NAME, USER_NODE_TYPE
from ops.cloud.cloud_api import API_ENDPOINT_ENV
from ops.errors import OpsError
from ops.review.prices import (
    NodePrice,
    node_type_price,
    price_note,
    region_factor,
    staleness_warning,
)
from ops.stacks.stack import Stack

__all__ = ["NodeCost", "cost_report", "hours_run", "node_costs", "stack_cost_report"]


@dataclass(frozen=True)
class NodeCost:
    name: str
    node_type: str
    state: str
    price: NodePrice | None  # None: the type is not in the YAML any more
    hours_run: float
    hours_existed: float
    market: str = ""
    """The rung the instance got (`reservation`, `any-reservation`, `spot`, `flex-start`,
    `on-demand`; spot is priced spot, the others at the on-demand list price); empty for a TPU
    VM."""

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @property
    def so_far(self) -> float:
        if self.price is None:
            return 0.0
        return Rate(self.price.running, self.price.stopped).spent(self.hours_run,
                                                                  self.hours_existed)

    @property
    def per_hour_now(self) -> float:
        if self.price is None:
            return 0.0
        return self.price.running if self.running else self.price.stopped


def _prices(config: ClusterConfig) -> dict[str, NodePrice]:
    region = config.provider.region
    return {name: node_type_price(t, region) for name, t in config.available_node_types.items()}


RESERVED = ("reservation", "any-reservation")
LIST_PRICED_NOTE = ("reserved and flex-start nodes are priced at the on-demand list price: "
                    "a reservation's commitment and flex-start's discount are not list prices")


def _shown_market(market: str) -> str:
    """A node's market as the report names it: `reserved` for a node from a reservation."""
    return "reserved" if market in RESERVED else market or "-"


def _fallback_prices(config: ClusterConfig) -> dict[str, NodePrice]:
    """The on-demand price of each type whose capacity policy may make on-demand-priced nodes
    (provider.capacity: the short form's fallback, a ladder's non-spot rungs)."""
    return {name: node_type_price(config.available_node_types[name], config.provider.region,
                                  spot=False)
            for name in config.provider.capacity or {}}


def _instance_price(config: ClusterConfig, node_type: str, market: str) -> NodePrice | None:
    """A compute instance's price by its type, at the market it really got."""
    known = config.available_node_types.get(node_type)
    if known is None:
        return None
    return node_type_price(known, config.provider.region, spot=market == SPOT)


def node_costs(config: ClusterConfig, now: datetime | None = None,
               endpoint: str | None = None, retry: RetryPolicy | None = None) -> list[NodeCost]:
    """Every node labelled with the cluster (the autoscaler's too), priced by its node type."""
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError
    from requests import RequestException

    try:
        return _node_costs(config, now, endpoint, retry or RetryPolicy())
    except (GoogleAPIError, GoogleAuthError, RequestException) as exc:
        raise OpsError(f"cost: cannot list the cluster's nodes in "
                       f"{config.provider.project}/{config.provider.availability_zone}: "
                       f"{str(exc).splitlines()[0]} (authenticate with `gcloud auth "
                       "application-default login` or provider.gcp_credentials)") from None


def _node_costs(config: ClusterConfig, now: datetime | None, endpoint: str | None,
                retry: RetryPolicy) -> list[NodeCost]:

    from infra.workers.clients import ApiClients, build_credentials
    from infra.workers.compute_api import aggregated_instances, instance_market, label_filter
    from infra.workers.retry import call_with_retry
    from infra.workers.zones import region_of

    now = now or datetime.now(timezone.utc)
    endpoint = endpoint if endpoint is not None else os.environ.get(API_ENDPOINT_ENV) or None
    secret = config.provider.gcp_credentials
    clients = ApiClients(
        build_credentials(secret.credentials.get_secret_value() if secret else None, endpoint),
        endpoint)
    project, zone = config.provider.project, config.provider.availability_zone
    labels = {CLUSTER_NAME: config.cluster_name}
    prices = _prices(config)
    # Every zone of the region: workers fail over to the region's other zones.
    region = config.provider.region
    instances = [instance for zone, instance in
                 aggregated_instances(clients, project, label_filter(labels), retry)
                 if region_of(zone) == region]
    costs = []
    for instance in instances:
        labels, status = instance.get("labels") or {}, instance.get("status", "")
        if labels.get(CLUSTER_NAME) != config.cluster_name:
            continue
        created = parse_time(instance.get("creationTimestamp", "")) or now
        node_type = labels.get(USER_NODE_TYPE, "")
        market = instance_market(instance)
        costs.append(NodeCost(
            instance["name"], node_type, status,
            _instance_price(config, node_type, market),
            hours_run(status, created, parse_time(instance.get("lastStartTimestamp", "")),
                      parse_time(instance.get("lastStopTimestamp", "")), now),
            (now - created).total_seconds() / 3600, market))
    if config.has_tpu:
        parent = f"projects/{project}/locations/{zone}"
        nodes = call_with_retry(lambda: list(clients.tpu.list_nodes(parent=parent, retry=None)),
                                retry)
        for node in nodes:
            if node.labels.get(CLUSTER_NAME) != config.cluster_name:
                continue
            created = node.create_time or now
            state = node.state.name
            node_type = node.labels.get(USER_NODE_TYPE, "")
            costs.append(NodeCost(node.name.rsplit("/", 1)[-1], node_type, state,
                                  prices.get(node_type),
                                  hours_run(state, created, None, None, now),
                                  (now - created).total_seconds() / 3600))
    return sorted(costs, key=lambda c: (c.node_type, c.name))


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def _price_row(name: str, price: NodePrice, priced: str) -> tuple[str, ...]:
    if price.unpriced:
        priced += f" (no price for {', '.join(price.unpriced)})"
    return (name, f"{price.machine:.4f}", f"{price.accelerators:.4f}", f"{price.disks:.4f}",
            f"{price.running:.4f}", f"{price.stopped:.4f}", priced)


def cost_report(stack: str, config: ClusterConfig, costs: list[NodeCost],
                today: date | None = None) -> str:
    """Per node type its hourly price by part, per node its hours, then the totals."""
    prices = _prices(config)
    lines = [f"stack {stack}: cluster {config.cluster_name} in "
             f"{config.provider.availability_zone}"]
    if warning := staleness_warning(today):
        lines.append(warning)
    _, region_note = region_factor(config.provider.region)
    if region_note:
        lines.append(f"note: {region_note}")
    lines.append("")
    rows: list[tuple[str, ...]] = [("NODE TYPE", "MACHINE $/H", "GPU/TPU $/H", "DISKS $/H",
                                    "RUNNING $/H", "STOPPED $/H", "PRICED AS")]
    for name, price in prices.items():
        rows.append(_price_row(name, price, "spot/preemptible" if price.spot else "on-demand"))
    for name, price in _fallback_prices(config).items():
        ladder = (config.provider.capacity or {})[name].is_ladder
        rows.append(_price_row(name, price, "on-demand list (reserved, flex-start, on-demand "
                                            "rungs)" if ladder else
                               "on-demand (spot's fallback)"))
    lines += _table(rows) + [""]
    if costs:
        rows = [("NODE", "TYPE", "MARKET", "STATE", "HOURS RUN", "SO FAR $", "NOW $/H")]
        rows += [(c.name, c.node_type or "-", _shown_market(c.market), c.state,
                  f"{c.hours_run:.2f}",
                  f"{c.so_far:.2f}" if c.price else "?", f"{c.per_hour_now:.4f}")
                 for c in costs]
        lines += _table(rows) + [""]
    else:
        lines += ["no nodes of the cluster exist (never created, or deleted)", ""]
    unknown = sorted({c.node_type or c.name for c in costs if c.price is None})
    if unknown:
        lines.append(f"not priced (no such node type in the YAML): {', '.join(unknown)}")
    if any(c.market in (*RESERVED, "flex-start") for c in costs):
        lines.append(f"note: {LIST_PRICED_NOTE}")
    lines.append(f"total so far: ${sum(c.so_far for c in costs):.2f}   "
                 f"per hour now: ${sum(c.per_hour_now for c in costs):.2f}/h")
    lines.append(price_note())
    return "\n".join(lines) + "\n"


def stack_cost_report(stack: str | None) -> str:
    """`invoke cost`: the report for the stack --stack names (its file must exist)."""
    chosen = Stack.choose(stack, require_file=True)
    return cost_report(chosen.name, chosen.cluster, node_costs(chosen.cluster))
