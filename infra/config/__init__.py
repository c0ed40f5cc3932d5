"""Cluster YAML -> validated model: defaults, normalisation and every config check live here,
the offline checks of Google Cloud names against the shipped catalog (catalog.py, catalog.yaml)
and the script that rebuilds that catalog from Google's APIs (catalog_refresh.py) included.

No pulumi imports: the model is shared by the program, the bootstrap renderer and the tasks.
"""

from infra.config.cluster import ClusterConfig, NodeType
from infra.config.errors import ConfigError
from infra.config.loader import load_cluster_config, parse_cluster_config
from infra.config.local_paths import expand_local_path
from infra.config.node_config import ComputeNodeConfig, TpuNodeConfig

__all__ = [
    "ClusterConfig",
    "ComputeNodeConfig",
    "ConfigError",
    "NodeType",
    "TpuNodeConfig",
    "expand_local_path",
    "load_cluster_config",
    "parse_cluster_config",
]
