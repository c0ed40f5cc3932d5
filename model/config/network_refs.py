"""A VPC network and subnetwork the cluster joins but does not own: another stack's (by
`pulumi.StackReference`), or any value a program passes as `RayClusterArgs.network` /
`subnetwork`. Each is checked and written in the partial URL form Compute documents:

- network: `projects/P/global/networks/N` ("you can specify the network as a full or partial
  URL", https://cloud.google.com/compute/docs/reference/rest/v1/instances, field
  `networkInterfaces[].network`), from a name, `global/networks/N`, that form or a self-link;
- subnetwork: `projects/P/regions/R/subnetworks/S` (the same page, `networkInterfaces[].
  subnetwork`: "a full or partial URL"), from a name (the cluster's region), `regions/R/
  subnetworks/S`, that form or a self-link. A subnetwork is regional: one outside the cluster's
  region cannot hold its nodes ("the subnet must be in the same region as the instance",
  https://cloud.google.com/vpc/docs/create-use-multiple-interfaces#specifications).

Resource names follow RFC 1035 as Compute requires (`[a-z]([-a-z0-9]{0,61}[a-z0-9])?`,
https://cloud.google.com/compute/docs/naming-resources). The YAML's own way to name a network
(`networkInterfaces` in a node_config, `networkConfig` for TPUs, as Ray's launcher reads them)
and these references are two answers to one question: a cluster takes one of them.
"""

from __future__ import annotations

import re

from model.config.cluster import ClusterConfig
from model.config.errors import ConfigError
from model.config.node_config import TpuNodeConfig
from model.config.urls import resource_path

_NAME = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
# Project ids, domain-scoped ones (`example.com:my-project`) included.
_PROJECT = re.compile(r"(?:[a-z0-9.-]+:)?[a-z][-a-z0-9]{4,28}[a-z0-9]")
NETWORK_FORMS = "a name, global/networks/N, projects/P/global/networks/N or its self-link"
SUBNETWORK_FORMS = ("a name, regions/R/subnetworks/S, projects/P/regions/R/subnetworks/S or its "
                    "self-link")


def network_path(value: object, project: str, source: str) -> str:
    """`value` as `projects/P/global/networks/N` (a bare name is in `project`); a ConfigError
    naming `source` for anything else."""
    parts = _parts(value)
    if len(parts) == 1:
        parts = ["global", "networks", *parts]
    if len(parts) == 3:
        parts = ["projects", project, *parts]
    if (len(parts) == 5 and parts[0] == "projects" and _PROJECT.fullmatch(parts[1])
            and parts[2:4] == ["global", "networks"] and _NAME.fullmatch(parts[4])):
        return "/".join(parts)
    raise ConfigError([(source, f"{value!r} is not a VPC network: give {NETWORK_FORMS}")])


def subnetwork_path(value: object, project: str, region: str, source: str) -> str:
    """`value` as `projects/P/regions/R/subnetworks/S` (a bare name is in `project` and
    `region`); a ConfigError naming `source` for another form or another region."""
    parts = _parts(value)
    if len(parts) == 1:
        parts = ["regions", region, "subnetworks", *parts]
    if len(parts) == 4:
        parts = ["projects", project, *parts]
    if not (len(parts) == 6 and parts[0] == "projects" and _PROJECT.fullmatch(parts[1])
            and parts[2] == "regions" and parts[4] == "subnetworks"
            and _NAME.fullmatch(parts[5])):
        raise ConfigError([(source, f"{value!r} is not a subnetwork: give {SUBNETWORK_FORMS}")])
    if parts[3] != region:
        raise ConfigError([(source, f"{value!r} is in region {parts[3]}, the cluster in "
                                    f"{region}: give a subnetwork of {region} (a subnet holds "
                                    "only nodes of its region)")])
    return "/".join(parts)


def _parts(value: object) -> list[str]:
    if not isinstance(value, str) or not value.strip():
        return []
    return resource_path(value.strip()).strip("/").split("/")


def networks_named_by_yaml(config: ClusterConfig) -> list[str]:
    """The YAML paths where a node_config names its own network (`networkInterfaces`, a TPU's
    `networkConfig.network`/`subnetwork`)."""
    named = []
    for name, node_type in config.available_node_types.items():
        node_config, path = node_type.node_config, f"available_node_types.{name}.node_config"
        if isinstance(node_config, TpuNodeConfig):
            network = node_config.network_config
            if network is not None and (network.network or network.subnetwork):
                named.append(f"{path}.networkConfig")
        elif node_config.network_interfaces:
            named.append(f"{path}.networkInterfaces")
    return named
