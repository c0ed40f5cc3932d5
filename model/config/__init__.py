"""Cluster YAML -> validated model: defaults, normalisation and every config check live here,
the offline checks of Google Cloud names against the shipped catalog (catalog.py, catalog.yaml)
included; the script that rebuilds that catalog from Google's APIs calls them, so it lives
in infra (infra/catalog_refresh.py).

No pulumi imports: the model is shared by the program, the bootstrap renderer and the tasks.
"""

from model.config.cluster import ClusterConfig, NodeType
from model.config.errors import ConfigError
from model.config.loader import load_cluster_config, parse_cluster_config
from model.config.local_paths import expand_local_path
from model.config.node_config import ComputeNodeConfig, TpuNodeConfig

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
