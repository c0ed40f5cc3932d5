"""The catalog checks (model/config/catalog.py) over a whole cluster: the provider's zones and
every node type's machine type, GPUs and TPU type, with YAML paths. The cluster model runs
them, so `plan`, `up` and the head's provider all refuse the same names."""

from __future__ import annotations

from collections.abc import Mapping

from model.config.catalog import (
    Findings,
    check_gpus,
    check_machine_type,
    check_tpu_config,
    check_tpu_type,
    location_warnings,
)
from model.config.node_config import ComputeNodeConfig, TpuNodeConfig
from model.config.urls import short_name


def check_cluster(
    region: str,
    zone: str,
    fallback_zones: list[str],
    node_configs: Mapping[str, ComputeNodeConfig | TpuNodeConfig],
) -> Findings:
    zones = {"provider.availability_zone": zone}
    zones.update({f"provider.fallback_zones[{i}]": z for i, z in enumerate(fallback_zones)})
    found = Findings()
    found.extend(location_warnings(region, zones), "")
    for name, config in node_configs.items():
        found.extend(check_node_config(config, zone), f"available_node_types.{name}.node_config")
    return found


def check_node_config(config: ComputeNodeConfig | TpuNodeConfig, zone: str) -> Findings:
    if isinstance(config, TpuNodeConfig):
        if config.accelerator_config is not None:
            return check_tpu_config(config.accelerator_config.type,
                                    config.accelerator_config.topology, zone)
        return check_tpu_type(config.accelerator_type or "", zone)
    machine = short_name(config.machine_type)
    found = Findings()
    found.extend(check_machine_type(machine), "machineType")
    gpus = [(short_name(g.accelerator_type), g.accelerator_count)
            for g in config.guest_accelerators]
    found.extend(check_gpus(machine, gpus, config.scheduling.on_host_maintenance), "")
    return found
