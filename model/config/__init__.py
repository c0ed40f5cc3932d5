"""Cluster YAML -> validated model: defaults, normalisation and every config check live here,
the offline checks of Google Cloud names against the shipped catalog (catalog.py, catalog.yaml)
included; the script that rebuilds that catalog from Google's APIs calls them, so it lives
in infra (infra/catalog_refresh.py).

No pulumi imports: the model is shared by the program, the bootstrap renderer and the tasks.
The names below are loaded when first asked for (PEP 562), so importing a light module of
the package (`model.config.errors`, `model.config.local_paths`) does not build the pydantic
models: the dynamic providers' plugin, which the engine starts for every run, needs only those.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from model.config.cluster import ClusterConfig, NodeType
    from model.config.errors import ConfigError
    from model.config.loader import load_cluster_config, parse_cluster_config
    from model.config.local_paths import expand_local_path
    from model.config.node_config import ComputeNodeConfig, TpuNodeConfig

_HOMES = {
    "ClusterConfig": "cluster",
    "NodeType": "cluster",
    "ConfigError": "errors",
    "load_cluster_config": "loader",
    "parse_cluster_config": "loader",
    "expand_local_path": "local_paths",
    "ComputeNodeConfig": "node_config",
    "TpuNodeConfig": "node_config",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
