"""The guardrails, once: each rule is a plain function over a resource's type token and inputs
(or, for the cluster-wide ones, every resource) and its parameters, returning the messages of
its violations. Pulumi's policy engine calls them through `policy/__main__.py`; the offline
review calls them through `evaluate`. A rule whose parameter is unset (an empty allow-list, no
cap, `required: false`) has nothing to check, so those default to `mandatory`: they bite once
a platform team sets them.

The pack config is Pulumi's policy-pack config form, a JSON object keyed by rule name:
`{"max-accelerators": {"enforcementLevel": "mandatory", "maxGpus": 8}, "cost-labels":
"disabled"}`; what it leaves out keeps the defaults here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.price_table import TABLE_FILE, load_table
from policy.nodes import CLOUD_PLATFORM, FIREWALL_TYPE, Node, node_of
from policy.prices import node_price

LEVELS = ("advisory", "mandatory", "disabled")
Params = Mapping[str, Any]
Resource = tuple[str, str, Mapping[str, Any]]  # (type token, logical name, inputs)
ResourceCheck = Callable[[str, Mapping[str, Any], Params], list[str]]
StackCheck = Callable[[list[Resource], Params], list[tuple[str, str]]]  # (resource, message)


def _node_check(check: Callable[[Node, Params], list[str]]) -> ResourceCheck:
    def on_resource(type_token: str, inputs: Mapping[str, Any], params: Params) -> list[str]:
        node = node_of(type_token, inputs)
        return check(node, params) if node is not None and node.count > 0 else []
    return on_resource


def _port_ranges(allow: Mapping[str, Any]) -> list[tuple[int, int]]:
    if str(allow.get("protocol", "")).lower() not in ("tcp", "all"):
        return []
    ports = allow.get("ports") or ["0-65535"]
    ranges = []
    for port in ports:
        low, _, high = str(port).partition("-")
        ranges.append((int(low), int(high or low)))
    return ranges


def open_ports(type_token: str, inputs: Mapping[str, Any], params: Params) -> list[str]:
    if type_token != FIREWALL_TYPE or inputs.get("direction", "INGRESS") != "INGRESS":
        return []
    world = sorted(set(inputs.get("sourceRanges") or []) & {"0.0.0.0/0", "::/0"})
    if not world:
        return []
    watched = [int(p) for p in params["ports"]]
    ranges = [r for allow in inputs.get("allows") or [] for r in _port_ranges(allow)]
    exposed = [p for p in watched if any(low <= p <= high for low, high in ranges)]
    if not exposed:
        return []
    return [f"port(s) {', '.join(map(str, exposed))} open to {', '.join(world)}: set "
            "provider.ssh_source_ranges (or the firewall's sourceRanges) to your networks"]


def _external_ip(node: Node, params: Params) -> list[str]:
    if not params["required"] or not node.external_ip:
        return []
    return ["node has an external IP (accessConfigs / enableExternalIps) but the stack must "
            "be private: set provider.use_internal_ips / private_cluster"]


def _spot(node: Node, params: Params) -> list[str]:
    if not params["required"] or node.head:
        return []
    if node.spot and node.on_demand_fallback:
        return ["spot worker that falls back to on-demand where spot is required: remove its "
                "type from provider.capacity"]
    if node.spot:
        return []
    return ["on-demand worker where spot is required: set scheduling.provisioningModel: SPOT "
            "(or preemptible) in its node_config"]


def _allowed(node: Node, params: Params) -> list[str]:
    found = []
    families, regions = params["families"], params["regions"]
    if families and node.family not in families:
        found.append(f"machine family {node.family!r} is not allowed (allowed: "
                     f"{', '.join(families)})")
    if regions and node.region not in regions:
        found.append(f"region {node.region!r} is not allowed (allowed: {', '.join(regions)})")
    return found


def _scope(node: Node, params: Params) -> list[str]:
    """Secret Manager takes only cloud-platform: a node that reads the Ray token needs it (its
    account is limited by IAM instead), so only a node that reads no secret is flagged."""
    if not any(scope in (CLOUD_PLATFORM, "cloud-platform") for scope in node.scopes):
        return []
    if node.reads_secret_manager:
        return []
    if node.head and not params["includeHead"]:
        return []
    return ["worker's service account has the cloud-platform scope: give it narrower scopes "
            "(serviceAccounts[].scopes in its node_config)"]


def _labels(node: Node, params: Params) -> list[str]:
    missing = [name for name in params["labels"] if not node.labels.get(name)]
    if not missing:
        return []
    return [f"missing cost label(s) {', '.join(missing)}: add them under the node_config's "
            "labels"]


def _cmek(node: Node, params: Params) -> list[str]:
    if not params["required"] or node.boot_disk_cmek is not False:
        return []
    return ["boot disk without a customer-managed key: set diskEncryptionKey.kmsKeyName on the "
            "boot disk"]


def _nodes(resources: list[Resource]) -> list[tuple[str, Node]]:
    return [(name, node) for type_token, name, inputs in resources
            if (node := node_of(type_token, inputs)) is not None and node.count > 0]


def max_accelerators(resources: list[Resource], params: Params) -> list[tuple[str, str]]:
    by_cluster: dict[str, list[int]] = {}
    for _, node in _nodes(resources):
        totals = by_cluster.setdefault(node.cluster, [0, 0])
        totals[0] += sum(count for _, count in node.gpus) * node.count
        totals[1] += node.tpu_chips * node.count
    found = []
    for cluster, (gpus, chips) in sorted(by_cluster.items()):
        for what, have, cap in (("GPUs", gpus, params["maxGpus"]),
                                ("TPU chips", chips, params["maxTpuChips"])):
            if cap is not None and have > cap:
                found.append((cluster, f"cluster {cluster!r} pins {have} {what}, above the cap "
                                       f"of {cap}"))
    return found


def max_hourly_price(resources: list[Resource], params: Params) -> list[tuple[str, str]]:
    cap = params["maxUsdPerHour"]
    if cap is None:
        return []
    table = load_table(str(params.get("priceTable") or TABLE_FILE))
    by_cluster: dict[str, float] = {}
    unpriced: set[str] = set()
    for _, node in _nodes(resources):
        price, missing = node_price(table, node)
        by_cluster[node.cluster] = by_cluster.get(node.cluster, 0.0) + price * node.count
        unpriced.update(missing)
    note = f" (without {', '.join(sorted(unpriced))}: not in the price table)" if unpriced else ""
    return [(cluster, f"cluster {cluster!r} costs about ${price:.2f}/h at its pinned size, "
                      f"above the cap of ${float(cap):.2f}/h{note}")
            for cluster, price in sorted(by_cluster.items()) if price > float(cap)]


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    level: str
    params: Mapping[str, Any]
    schema: Mapping[str, Mapping[str, Any]]
    on_resource: ResourceCheck | None = None
    on_stack: StackCheck | None = None


_STRINGS = {"type": "array", "items": {"type": "string"}}
_FLAG = {"type": "boolean"}
_CAP = {"type": ["number", "null"]}

RULES: tuple[Rule, ...] = (
    Rule("no-open-admin-ports", "SSH and Ray ports (GCS, dashboard, client) not open to the "
         "whole internet", "advisory", {"ports": [22, 6379, 8265, 10001]},
         {"ports": {"type": "array", "items": {"type": "integer"}}}, on_resource=open_ports),
    Rule("private-nodes", "no external IPs on nodes where the stack must be private",
         "mandatory", {"required": False}, {"required": _FLAG},
         on_resource=_node_check(_external_ip)),
    Rule("max-accelerators", "GPUs and TPU chips pinned per cluster at most a cap", "mandatory",
         {"maxGpus": None, "maxTpuChips": None}, {"maxGpus": _CAP, "maxTpuChips": _CAP},
         on_stack=max_accelerators),
    Rule("spot-workers", "workers run on spot (or preemptible) capacity where required",
         "mandatory", {"required": False}, {"required": _FLAG}, on_resource=_node_check(_spot)),
    Rule("allowed-machines", "machine families (n2, a2, v4 ...) and regions from an allow-list",
         "mandatory", {"families": [], "regions": []},
         {"families": _STRINGS, "regions": _STRINGS}, on_resource=_node_check(_allowed)),
    Rule("no-cloud-platform-scope", "worker service accounts without the cloud-platform scope",
         "advisory", {"includeHead": False}, {"includeHead": _FLAG},
         on_resource=_node_check(_scope)),
    Rule("cost-labels", "every node carries the cost labels", "advisory",
         {"labels": ["team", "cost-center"]}, {"labels": _STRINGS},
         on_resource=_node_check(_labels)),
    Rule("max-hourly-price", "the pinned nodes' hourly price (price table) at most a cap",
         "mandatory", {"maxUsdPerHour": None, "priceTable": ""},
         {"maxUsdPerHour": _CAP, "priceTable": {"type": "string"}}, on_stack=max_hourly_price),
    Rule("boot-disk-cmek", "boot disks encrypted with a customer-managed key where required",
         "mandatory", {"required": False}, {"required": _FLAG}, on_resource=_node_check(_cmek)),
)
BY_NAME = {rule.name: rule for rule in RULES}


class PackConfigError(ValueError):
    pass


def load_pack_config(path: str | Path | None) -> dict[str, Any]:
    """The pack config file (Pulumi's `--policy-pack-config` form), checked; {} for none."""
    if not path:
        return {}
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise PackConfigError(f"policy config {path}: {error}") from None
    if not isinstance(config, dict):
        raise PackConfigError(f"policy config {path}: must be a JSON object keyed by policy name")
    for name, value in config.items():
        if name != "all" and name not in BY_NAME:
            raise PackConfigError(f"policy config {path}: unknown policy {name!r} (known: "
                                  f"{', '.join(BY_NAME)})")
        level = value if isinstance(value, str) else (value or {}).get("enforcementLevel")
        if level is not None and level not in LEVELS:
            raise PackConfigError(f"policy config {path}: {name}: enforcementLevel {level!r} "
                                  f"is not one of {', '.join(LEVELS)}")
    return config


def settings(rule: Rule, config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The rule's level and parameters: its defaults under what the config sets."""
    entry = config.get(rule.name, {})
    if isinstance(entry, str):
        entry = {"enforcementLevel": entry}
    level = entry.get("enforcementLevel") or config.get("all") or rule.level
    params = {**rule.params, **{k: v for k, v in entry.items() if k != "enforcementLevel"}}
    return level, params


@dataclass(frozen=True, order=True)
class Violation:
    policy: str
    level: str
    resource: str
    message: str


def evaluate(resources: Iterable[Resource], config: Mapping[str, Any]) -> list[Violation]:
    """Every rule the config leaves on, over every resource: the violations, sorted."""
    resources = list(resources)
    found = []
    for rule in RULES:
        level, params = settings(rule, config)
        if level == "disabled":
            continue
        if rule.on_resource is not None:
            found += [Violation(rule.name, level, name, message)
                      for type_token, name, inputs in resources
                      for message in rule.on_resource(type_token, inputs, params)]
        if rule.on_stack is not None:
            found += [Violation(rule.name, level, name, message)
                      for name, message in rule.on_stack(resources, params)]
    return sorted(found)
