"""What the cluster's network already allows, read before `invoke up` and in `invoke preflight`.

Narrowing the cluster's own SSH rule changes nothing while another rule of the network admits
SSH more widely (GCP's stock `default-allow-ssh` admits 0.0.0.0/0 on the `default` network,
which the program prefers): so every enabled INGRESS rule that reaches the cluster's nodes
and admits SSH, or one of Ray's ports, from ranges the cluster's own rules do not is named.
A private cluster's subnet without Private Google Access reaches Google's APIs (GCS, Artifact
Registry) only through the Cloud NAT: that is said with the command that turns it on.
Reads only (subnetworks.get/list, firewalls.list); each finding is one line.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from model.config import ClusterConfig, ComputeNodeConfig
from model.plan import ClusterPlan, plan_cluster, subnet_preference
from ops.lifecycle.apis import QuotaApis
from ops.remote.host_keys import credentials_may_exist

SSH_PORT = 22
# GCS, object manager, dashboard, Ray client: what must never face the internet.
RAY_PORTS = {6379: "GCS", 8076: "object manager", 8265: "dashboard", 10001: "Ray client"}


@dataclass(frozen=True)
class ClusterSubnet:
    project: str
    region: str
    network: str
    """The network's name (`default`)."""
    subnetwork: str | None
    """The subnet's name, when the YAML or the region names one."""
    private_google_access: bool | None = None


def network_warnings(config: ClusterConfig, apis: QuotaApis) -> list[str]:
    """One line per finding; one line when the network cannot be read."""
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError
    from requests import RequestException

    if not (apis.endpoint or config.provider.gcp_credentials or credentials_may_exist()):
        return ["the cluster's network was not checked for wider firewall rules: no "
                "Application Default Credentials (`gcloud auth application-default login`)"]
    plan = plan_cluster(config)
    try:
        subnet = cluster_subnet(config, apis)
        rules = network_firewalls(apis, subnet)
    except (GoogleAPIError, GoogleAuthError, RequestException) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return [f"the cluster's network could not be read, so no other firewall rule was "
                f"checked ({first})"]
    lines = wider_rules(plan, rules)
    private = config.provider.private_cluster or config.provider.use_internal_ips
    if private and subnet.subnetwork and subnet.private_google_access is False:
        lines.append(
            f"subnet {subnet.subnetwork} of {subnet.region} has no Private Google Access: nodes "
            "without a public address reach Google's APIs (GCS, Artifact Registry) only "
            "through the Cloud NAT; turn it on with `gcloud compute networks subnets update "
            f"{subnet.subnetwork} --region={subnet.region} --enable-private-ip-google-access "
            f"--project={subnet.project}`"
        )
    return lines


def cluster_subnet(config: ClusterConfig, apis: QuotaApis) -> ClusterSubnet:
    """The subnet the program puts the nodes in: the head's explicit interface, else the
    region's subnet it would pick."""
    from infra.workers.retry import call_with_retry

    project, region = config.provider.project, config.provider.region
    head = config.head_type.node_config
    interfaces = head.network_interfaces if isinstance(head, ComputeNodeConfig) else None
    if config.uses_explicit_network and interfaces:
        named = interfaces[0]
        if not named.subnetwork:
            return ClusterSubnet(project, region, _last(named.network or "default"), None)
        name = _last(named.subnetwork)
        body = call_with_retry(lambda: apis.clients.compute.call(
            "subnetworks.get", project=project, region=region, subnetwork=name), apis.retry)
    else:
        listed = apis.clients.compute.items("subnetworks.list", apis.retry, project=project,
                                            region=region)
        if not listed:
            return ClusterSubnet(project, region, "default", None)
        body = sorted(listed, key=lambda s: subnet_preference(s["name"]))[0]
    return ClusterSubnet(project, region, _last(body.get("network", "default")),
                         body.get("name"), bool(body.get("privateIpGoogleAccess")))


def network_firewalls(apis: QuotaApis, subnet: ClusterSubnet) -> list[dict[str, Any]]:
    """The network's firewall rules in API JSON."""
    rules = apis.clients.compute.items("firewalls.list", apis.retry, project=subnet.project)
    return [rule for rule in rules if _last(rule.get("network", "")) == subnet.network]


def wider_rules(plan: ClusterPlan, rules: Iterable[dict[str, Any]]) -> list[str]:
    """Each rule other than the cluster's own that admits SSH to the head, or a Ray port to
    any node, from a range the cluster's own rules do not admit."""
    firewall = plan.firewall
    own = {f"{firewall.cluster_tag}-ssh", f"{firewall.cluster_tag}-internal"}
    ours = [ipaddress.ip_network(cidr, strict=False) for cidr in firewall.ssh_source_ranges]
    head_account = plan.head.service_account_email
    lines = []
    for rule in sorted(rules, key=lambda r: r.get("name", "")):
        if rule.get("name") in own or rule.get("disabled") or \
                rule.get("direction", "INGRESS") != "INGRESS":
            continue
        ranges = [ipaddress.ip_network(cidr, strict=False)
                  for cidr in rule.get("sourceRanges") or []]
        if not ranges:
            continue  # sources by tag or account only: other instances of the network
        name, shown = rule.get("name"), ", ".join(rule.get("sourceRanges") or [])
        wider_than_ssh = [r for r in ranges if not any(_within(r, o) for o in ours)]
        if wider_than_ssh and _admits(rule, SSH_PORT) and \
                _reaches(rule, plan.head.network_tags, head_account):
            lines.append(
                f"firewall rule {name} admits SSH to the head from {shown}, wider than the "
                f"cluster's own {firewall.cluster_tag}-ssh "
                f"({', '.join(firewall.ssh_source_ranges)}): narrowing ours changes nothing "
                f"while it exists; remove or narrow it (`gcloud compute firewall-rules delete "
                f"{name} --project={plan.project}`)"
            )
        reached = [group for group in [plan.head, *plan.node_types.values()]
                   if _reaches(rule, group.network_tags, group.service_account_email)]
        ports = [f"{port} ({what})" for port, what in RAY_PORTS.items() if _admits(rule, port)]
        if reached and ports:
            lines.append(
                f"firewall rule {name} admits Ray's ports {', '.join(ports)} from {shown}, "
                f"where the cluster's own {firewall.cluster_tag}-internal admits them only "
                "between its nodes: narrow it, or keep its targets off the cluster's nodes"
            )
    return lines


def _within(network: Any, other: Any) -> bool:
    return network.version == other.version and network.subnet_of(other)


def _admits(rule: dict[str, Any], port: int) -> bool:
    for allowed in rule.get("allowed") or []:
        if allowed.get("IPProtocol") not in ("tcp", "all", "6"):
            continue
        ports = allowed.get("ports") or []
        if not ports or any(_in_range(port, spec) for spec in ports):
            return True
    return False


def _in_range(port: int, spec: str) -> bool:
    low, _, high = spec.partition("-")
    return int(low) <= port <= int(high or low)


def _reaches(rule: dict[str, Any], tags: Iterable[str], account: str | None) -> bool:
    targets, accounts = rule.get("targetTags") or [], rule.get("targetServiceAccounts") or []
    if not targets and not accounts:
        return True  # every instance of the network
    return bool(set(targets) & set(tags)) or (account is not None and account in accounts)


def _last(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def render_warnings(lines: list[str]) -> str:
    return "\n".join(f"warning: {line}" for line in lines)
