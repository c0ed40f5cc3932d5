"""Render the POSIX startup script that turns a GCE instance or TPU VM into a Ray node.

The script is the node's data (rendered here, every user value shell-quoted) followed by the
fixed library in `node_bootstrap.sh` and the ordered steps for the node's role and type:
file mounts, initialization commands (host), docker pull/run, setup commands, `ray stop`, start
commands with `$RAY_HEAD_IP` and Ray's resource override exported. It logs each stage and
reports progress and failures where `status` can read them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from bootstrap.file_mounts import FileMountPlan
from infra.config import ClusterConfig, TpuNodeConfig

Role = Literal["head", "worker"]
LIBRARY = Path(__file__).with_name("node_bootstrap.sh")
DOCKER_MOUNT_ROOT = "/tmp/ray_tmp_mount"  # Ray's get_docker_host_mount_location

# Stage names in the order a node goes through them (`docker-*` only with docker, the head's
# own only on the head).
STAGES = (
    "prepare",
    "file-mounts",
    "bootstrap-files",
    "initialization",
    "docker-pull",
    "docker-run",
    "head-address",
    "setup",
    "ray-stop",
    "ray-start",
    "config-watcher",
)
HEAD_ONLY_STAGES = ("bootstrap-files", "config-watcher")
WATCH_CONFIG_ARG = "watch-config"  # `sh <script> watch-config HOME RUN_AS`: the head's watcher


def render_startup_script(
    config: ClusterConfig,
    role: Role,
    node_type: str,
    file_mounts: FileMountPlan | None = None,
) -> str:
    """The whole `startup-script` for one node of `node_type` in `role`."""
    if node_type not in config.available_node_types:
        raise ValueError(
            f"node type {node_type!r} is not in available_node_types: use one of "
            f"{sorted(config.available_node_types)}"
        )
    plan = file_mounts or FileMountPlan()
    return "\n".join([
        "#!/bin/sh",
        f"# Ray {role} bootstrap for cluster {config.cluster_name!r}, node type {node_type!r}.",
        "# Rendered by the bootstrap package from the cluster YAML: edit the YAML, not this.",
        "# User commands are single-quoted data; their $RAY_HEAD_IP expands when they run.",
        "# shellcheck disable=SC2016",
        "set -u",
        "",
        _node_data(config, role, node_type, plan),
        LIBRARY.read_text(),
        _steps(config, role, node_type, plan),
    ])


def _assign(name: str, value: str) -> str:
    return f"{name}={_quote(value)}"


def _quote(value: str) -> str:
    """Always single-quoted, so the shell takes user text as data (no expansion here)."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


def _node_data(config: ClusterConfig, role: Role, node_type: str, plan: FileMountPlan) -> str:
    docker = config.docker
    image = config.docker_image_for(role, node_type) if docker.enabled else ""
    pull = config.docker_pull_before_run_for(role, node_type)
    run_options = config.docker_run_options_for(role, node_type)
    type_config = config.available_node_types[node_type]
    resources = dict(type_config.resources)
    host0_resources = dict(resources)
    is_tpu = isinstance(type_config.node_config, TpuNodeConfig)
    if isinstance(type_config.node_config, TpuNodeConfig):  # narrows the type for mypy
        # Ray's GCP provider gives the pod's first host this resource (autoscaler demand).
        host0_resources[f"TPU-{type_config.node_config.tpu_type_name}-head"] = 1
    lines = [
        "# ---- this node",
        _assign("NODE_CLUSTER", config.cluster_name),
        _assign("NODE_ROLE", role),
        _assign("NODE_TYPE", node_type),
        _assign("NODE_SSH_USER", config.auth.ssh_user),
        _assign("NODE_IS_TPU", _flag(is_tpu)),
        _assign("RESOURCES_JSON", _json(resources)),
        _assign("RESOURCES_JSON_TPU_HOST0", _json(host0_resources)),
        _assign("LABELS_JSON", _json(type_config.labels)),
        _assign("DOCKER_IMAGE", image),
        _assign("DOCKER_CONTAINER", docker.container_name),
        _assign("DOCKER_PULL_BEFORE_RUN", _flag(pull)),
        _assign("DOCKER_RUN_OPTIONS", " ".join(run_options)),
        _assign("DOCKER_DETECT_GPU", _flag(not docker.disable_automatic_runtime_detection)),
        _assign("DOCKER_DETECT_SHM", _flag(not _has_shm_option(run_options)
                                           and not docker.disable_shm_size_detection)),
        _assign("DOCKER_MOUNT_DIR", f"{DOCKER_MOUNT_ROOT}/{config.cluster_name}"),
        _assign("DOCKER_MOUNT_TARGETS", "\n".join(plan.targets)),
        'HEAD_RESOLVE_TRIES=${RAY_BOOTSTRAP_RESOLVE_TRIES:-120}',
        'HEAD_RESOLVE_DELAY=${RAY_BOOTSTRAP_RESOLVE_DELAY:-5}',
        "",
    ]
    return "\n".join(lines)


def _steps(config: ClusterConfig, role: Role, node_type: str, plan: FileMountPlan) -> str:
    docker = bool(config.docker.enabled)
    lines = []
    if role == "head":  # the same script, run detached, is the head's config watcher
        lines += [f'if [ "${{1:-}}" = {WATCH_CONFIG_ARG} ]; then',
                  '    open_log', '    watch_config "$2" "${3:-}"', "    exit", "fi", ""]
    lines += ["# ---- the steps, in order", "open_log", 'log "bootstrap starts"']
    lines += ["begin_stage prepare", "prepare_node"]
    lines.append("begin_stage file-mounts")
    lines += [f"write_file_mount {_quote(m.key)} {_quote(m.target)}"
              for m in plan.in_metadata]
    if role == "head":
        lines += ["begin_stage bootstrap-files", "write_bootstrap_files"]
    lines.append("begin_stage initialization")
    lines += [f"run_host {_quote(c)}" for c in config.initialization_commands]
    if docker:
        lines += ["begin_stage docker-pull", "docker_pull", "begin_stage docker-run",
                  "docker_start"]
        if role == "head":
            lines.append("docker_copy_bootstrap_files")
    lines += ["begin_stage head-address", "resolve_head_ip"]
    lines.append("begin_stage setup")
    lines += [f"run_node {_quote(c)}" for c in config.setup_commands_for(role, node_type)]
    lines += ["begin_stage ray-stop", "stop_ray"]
    lines += ["begin_stage ray-start", "export_resources"]
    lines += [f"run_node {_quote(c)}" for c in config.start_commands_for(role)]
    if role == "head":
        lines += ["begin_stage config-watcher", "start_config_watcher"]
    lines += ["finish", ""]
    return "\n".join(lines)


def _json(value: dict) -> str:
    return json.dumps(value, sort_keys=True) if value else ""


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _has_shm_option(run_options: list[str]) -> bool:
    return any("--shm-size" in option for option in run_options)
