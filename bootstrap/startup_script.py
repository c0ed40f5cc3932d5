"""Render the POSIX startup script that turns a GCE instance or TPU VM into a Ray node.

The script is the node's data (rendered here, every user value shell-quoted) followed by the
fixed library in `node_bootstrap.sh` and the ordered steps for the node's role and type:
file mounts, initialization commands (host), docker pull/run, setup commands, `ray stop`, start
commands with `$RAY_HEAD_IP` and Ray's resource override exported. It logs each stage and
reports progress and failures where `status` can read them.

The script stays self-contained (Ray's autoscaler launches workers from node_configs that carry
it, and they boot themselves), but the library travels compressed: every node_config in the
head's `ray-bootstrap-config` holds a whole script, and GCE caps one metadata value at 256 KB.
Header, node data and steps stay plain text (readable in previews); the library, its full-line
comments dropped, is a gzip+base64 payload that the script decodes into a private temporary
file (a `mktemp -d` directory, 0700, the file 0600), sources, and removes before the first
step. Decoding needs only POSIX sh, `mktemp`, `base64 -d` (coreutils) and `gzip -dc`, present
on every GCE and TPU VM image; when it fails the node reports `failed:library:7`. The payload is
out of shellcheck's sight in the script: the tests check `node_bootstrap.sh` on its own.

The payload is deterministic (gzip mtime 0, header OS byte 255): the same library renders the
same bytes on every run and machine with the same zlib. Another deflate implementation (zlib-ng,
as some distributions ship) may compress differently and so change the script.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import re
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
# Before any stage: the library cannot be decoded (`failed:library:7`).
LIBRARY_STAGE = "library"
LIBRARY_EXIT_CODE = 7
LIBRARY_DELIMITER = "RAY_BOOTSTRAP_LIBRARY"  # ends the payload's here-document
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
            f"{', '.join(sorted(config.available_node_types))}"
        )
    plan = file_mounts or FileMountPlan()
    return "\n".join([
        "#!/bin/sh",
        f"# Ray {role} bootstrap for cluster {config.cluster_name!r}, node type {node_type!r}.",
        "# Rendered by the bootstrap package from the cluster YAML: edit the YAML, not this.",
        "# User commands are single-quoted data; their $RAY_HEAD_IP expands when they run.",
        "# The node data is used by the library, which the script decodes and sources below.",
        "# shellcheck disable=SC2016,SC2034",
        "set -u",
        "",
        _node_data(config, role, node_type, plan),
        _library_loader(),
        _steps(config, role, node_type, plan),
    ])


@functools.cache
def library_payload() -> str:
    """`node_bootstrap.sh` without its comment lines, gzip-compressed, base64 on one line: the
    same bytes on every run (mtime 0; OS byte 255, which Python 3.11 leaves to zlib). Built
    once a process: every node type's script embeds the same payload."""
    compressed = bytearray(gzip.compress(library_code().encode(), compresslevel=9, mtime=0))
    compressed[9] = 255  # the gzip header's OS field: "unknown"
    return base64.b64encode(bytes(compressed)).decode()


def library_code() -> str:
    """The library as nodes run it: full-line comments dropped (they are a quarter of it and
    live on in the repository), here-document bodies kept as they are."""
    kept: list[str] = []
    delimiter = None
    for line in LIBRARY.read_text().splitlines():
        if delimiter is not None:
            delimiter = None if line.lstrip("\t") == delimiter else delimiter
        elif line.lstrip().startswith("#"):
            continue
        elif match := _HEREDOC.search(line):
            delimiter = match.group(1)
        kept.append(line)
    return "\n".join(kept) + "\n"


# A here-document's delimiter (`<< EOF`, `<<-'EOF'`): its body keeps lines that start with #.
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)")


def _library_loader() -> str:
    """Shell that decodes the library into a private file, sources it and removes it."""
    return (_LOADER.replace("@STATUS@", f"failed:{LIBRARY_STAGE}:{LIBRARY_EXIT_CODE}")
            .replace("@STAGE@", LIBRARY_STAGE).replace("@CODE@", str(LIBRARY_EXIT_CODE))
            .replace("@DELIMITER@", LIBRARY_DELIMITER).replace("@PAYLOAD@", library_payload()))


# Until the library is sourced there is no `fail`: library_failed logs and reports as it would.
_LOADER = r"""# ---- the library (node_bootstrap.sh): decoded into a private file and sourced
library_failed() {
    line="$(date -u +%Y-%m-%dT%H:%M:%SZ) [ray-bootstrap] stage=@STAGE@ failed exit=@CODE@: $1"
    printf '%s\n' "$line" >&2
    (printf '%s\n' "$line" >> "${RAY_BOOTSTRAP_LOG:-/var/log/ray-bootstrap.log}") 2> /dev/null
    if [ -n "${RAY_BOOTSTRAP_STATUS_DIR:-}${RAY_BOOTSTRAP_METADATA_DIR:-}" ]; then
        status=${RAY_BOOTSTRAP_STATUS_DIR:-$RAY_BOOTSTRAP_METADATA_DIR/../guest-attributes}
        mkdir -p "$status/ray-bootstrap" && printf @STATUS@ > "$status/ray-bootstrap/status"
    else
        url=${RAY_BOOTSTRAP_METADATA_URL:-http://metadata.google.internal/computeMetadata/v1}
        curl -fsS -X PUT --data @STATUS@ -H 'Metadata-Flavor: Google' \
            "$url/instance/guest-attributes/ray-bootstrap/status" > /dev/null 2>&1
    fi
    exit @CODE@
}
BOOTSTRAP_LIBRARY_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ray-bootstrap.XXXXXX") \
    || library_failed "mktemp -d cannot create a private directory"
trap 'rm -rf "$BOOTSTRAP_LIBRARY_DIR"' EXIT
(umask 077 && base64 -d | gzip -dc > "$BOOTSTRAP_LIBRARY_DIR/node_bootstrap.sh") \
    << '@DELIMITER@' || library_failed "cannot decode it (base64 -d | gzip -dc)"
@PAYLOAD@
@DELIMITER@
# shellcheck source=/dev/null
. "$BOOTSTRAP_LIBRARY_DIR/node_bootstrap.sh"
rm -rf "$BOOTSTRAP_LIBRARY_DIR"
trap - EXIT
"""


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
