"""Render the POSIX startup script that turns a GCE instance or TPU VM into a Ray node.

The script is the node's data (rendered here, every user value shell-quoted) followed by the
fixed library in `node_bootstrap.sh` and the ordered steps for the node's role and type:
file mounts, initialization commands (host), docker pull/run, setup commands, `ray stop`, start
commands with `$RAY_HEAD_IP`, Ray's resource override and its token auth
(`RAY_AUTH_MODE=token`, `RAY_AUTH_TOKEN_PATH`) exported. It logs each stage and
reports progress and failures where `status` can read them.

The same script converges a running node on a newer one (`sh SCRIPT reapply MODE`, run by the
node watcher of node_reapply.sh): each changeable stage carries the hash of what it runs, and
only stages whose hash differs from the one the node recorded run again before Ray restarts.
The script's own SCRIPT_VERSION is what the node reports once it has applied it.

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
import hashlib
import json
import re
import shlex
from pathlib import Path
from typing import Literal

from bootstrap.file_mounts import FileMountArchive
from bootstrap.head_provider import pinned
from bootstrap.head_provider_metadata import payload_digest
from model.config import ClusterConfig, TpuNodeConfig
from model.identities import bucket_name

Role = Literal["head", "worker"]
LIBRARY = Path(__file__).with_name("node_bootstrap.sh")
# The re-apply watcher, shipped in the same payload after the library.
REAPPLY_LIBRARY = Path(__file__).with_name("node_reapply.sh")
DOCKER_MOUNT_ROOT = "/tmp/ray_tmp_mount"  # Ray's get_docker_host_mount_location

# Stage names in the order a node goes through them (`docker-*` only with docker, the head's
# own only on the head).
STAGES = (
    "prepare",
    "file-mounts",
    "bootstrap-files",
    "head-provider",
    "initialization",
    "docker-pull",
    "docker-run",
    "head-address",
    "ray-auth",
    "setup",
    "ray-stop",
    "ray-start",
    "config-watcher",
    "autostop",
    "node-watcher",
)
HEAD_ONLY_STAGES = ("bootstrap-files", "head-provider", "config-watcher", "autostop")
# Before any stage: the library cannot be decoded (`failed:library:7`).
LIBRARY_STAGE = "library"
LIBRARY_EXIT_CODE = 7
LIBRARY_DELIMITER = "RAY_BOOTSTRAP_LIBRARY"  # ends the payload's here-document
WATCH_CONFIG_ARG = "watch-config"  # `sh <script> watch-config HOME RUN_AS`: the head's watcher
WATCH_SCRIPT_ARG = "watch-script"  # `sh <script> watch-script`: every node's re-apply watcher
REAPPLY_ARG = "reapply"  # `sh <script> reapply MODE`: converge a running node on this script


def render_startup_script(
    config: ClusterConfig,
    role: Role,
    node_type: str,
    file_mounts: FileMountArchive | None = None,
) -> str:
    """The whole `startup-script` for one node of `node_type` in `role`; `file_mounts` is the
    packed archive the node fetches from the cluster's bucket (None: the YAML has none)."""
    if node_type not in config.available_node_types:
        raise ValueError(
            f"node type {node_type!r} is not in available_node_types: use one of "
            f"{', '.join(sorted(config.available_node_types))}"
        )
    data = _node_data(config, role, node_type, file_mounts)
    body = [data, _library_loader(role), _steps(config, role, node_type, file_mounts, data)]
    version = hashlib.sha256("\n".join(body).encode()).hexdigest()[:16]
    return "\n".join([
        "#!/bin/sh",
        f"# Ray {role} bootstrap for cluster {config.cluster_name!r}, node type {node_type!r}.",
        "# Rendered by the bootstrap package from the cluster YAML: edit the YAML, not this.",
        "# User commands are single-quoted data; their $RAY_HEAD_IP expands when they run.",
        "# The node data is used by the library, which the script decodes and sources below.",
        "# shellcheck disable=SC2016,SC2034",
        "set -u",
        "",
        _assign("SCRIPT_VERSION", version),
        *body,
    ])


@functools.cache
def library_payload(role: Role = "head") -> str:
    """The library (`library_code`) gzip-compressed, base64 on one line: the same bytes on
    every run (mtime 0; OS byte 255, which Python 3.11 leaves to zlib). Built once a process
    and role: every node type's script embeds the same payload."""
    compressed = bytearray(gzip.compress(library_code(role).encode(), compresslevel=9, mtime=0))
    compressed[9] = 255  # the gzip header's OS field: "unknown"
    return base64.b64encode(bytes(compressed)).decode()


def library_code(role: Role = "head") -> str:
    """The library (node_bootstrap.sh, then node_reapply.sh) as nodes run it: full-line
    comments dropped (they are a quarter of it and live on in the repository), here-document
    bodies kept as they are. A worker's leaves out the sections marked head only (the
    autoscaler config, its key, the config watcher): the head's autoscaler config carries a
    worker script per node type, within GCE's 256 KB for one metadata value."""
    kept: list[str] = []
    for path in (LIBRARY, REAPPLY_LIBRARY):
        kept += _code_lines(path.read_text(), role)
    return "\n".join(kept) + "\n"


def _code_lines(text: str, role: Role) -> list[str]:
    """One file's lines as nodes run them (see library_code); a head-only section ends at
    its end marker or at the end of the file."""
    kept: list[str] = []
    delimiter = None
    head_only = False
    for line in text.splitlines():
        if delimiter is not None:
            delimiter = None if line.lstrip("\t") == delimiter else delimiter
        elif line.startswith(HEAD_ONLY_MARKER):
            head_only = True
            continue
        elif line.startswith(HEAD_ONLY_END_MARKER):
            head_only = False
            continue
        elif line.lstrip().startswith("#"):
            continue
        elif match := _HEREDOC.search(line):
            delimiter = match.group(1)
        if role == "head" or not head_only:
            kept.append(line)
    return kept


HEAD_ONLY_MARKER = "# ---- head only"
HEAD_ONLY_END_MARKER = "# ---- end of head only"
# A here-document's delimiter (`<< EOF`, `<<-'EOF'`): its body keeps lines that start with #.
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)")


def _library_loader(role: Role) -> str:
    """Shell that decodes the library into a private file, sources it and removes it."""
    return (_LOADER.replace("@STATUS@", f"failed:{LIBRARY_STAGE}:{LIBRARY_EXIT_CODE}")
            .replace("@STAGE@", LIBRARY_STAGE).replace("@CODE@", str(LIBRARY_EXIT_CODE))
            .replace("@DELIMITER@", LIBRARY_DELIMITER).replace("@PAYLOAD@", library_payload(role)))


# Until the library is sourced there is no `fail`: library_failed logs and reports as it would.
_LOADER = r"""# ---- the library (node_bootstrap.sh): decoded into a private file and sourced
library_failed() {
    line="$(date -u +%Y-%m-%dT%H:%M:%SZ) [ray-bootstrap] stage=@STAGE@ failed exit=@CODE@: $1"
    printf '%s\n' "$line" >&2
    (umask 077 && printf '%s\n' "$line" >> "${RAY_BOOTSTRAP_LOG:-/var/log/ray-bootstrap.log}") \
        2> /dev/null
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


def _node_data(config: ClusterConfig, role: Role, node_type: str,
               mounts: FileMountArchive | None) -> str:
    docker = config.docker
    image = config.docker_image_for(role, node_type) if docker.enabled else ""
    pull = config.docker_pull_before_run_for(role, node_type)
    run_words = docker_run_words(config, role, node_type)
    type_config = config.available_node_types[node_type]
    resources = dict(type_config.resources)
    host0_resources = dict(resources)
    is_tpu = isinstance(type_config.node_config, TpuNodeConfig)
    if isinstance(type_config.node_config, TpuNodeConfig):  # narrows the type for mypy
        # Ray's GCP provider gives the pod's first host this resource (autoscaler demand).
        host0_resources[f"TPU-{type_config.node_config.tpu_type_name}-head"] = 1
    v2 = config.provider.autoscaler_version == "v2"
    lines = [
        "# ---- this node",
        _assign("NODE_CLUSTER", config.cluster_name),
        _assign("NODE_ROLE", role),
        _assign("NODE_TYPE", node_type),
        _assign("NODE_SSH_USER", config.auth.ssh_user),
        _assign("NODE_IS_TPU", _flag(is_tpu)),
        _assign("NODE_RAY_TOKEN_AUTH", _flag(config.provider.ray_token_auth)),
        _assign("RESOURCES_JSON", _json(resources)),
        _assign("RESOURCES_JSON_TPU_HOST0", _json(host0_resources)),
        _assign("LABELS_JSON", _json(type_config.labels)),
        _assign("DOCKER_IMAGE", image),
        _assign("DOCKER_CONTAINER", docker.container_name),
        _assign("DOCKER_PULL_BEFORE_RUN", _flag(pull)),
        _assign("DOCKER_DETECT_GPU", _flag(not docker.disable_automatic_runtime_detection)),
        _assign("DOCKER_DETECT_SHM", _flag(not _has_shm_option(run_words)
                                           and not docker.disable_shm_size_detection)),
        _assign("DOCKER_MOUNT_DIR", f"{DOCKER_MOUNT_ROOT}/{config.cluster_name}"),
        _assign("DOCKER_MOUNT_TARGETS", "\n".join(mounts.targets if mounts else ())),
        _assign("CLUSTER_BUCKET", bucket_name(config)),
        *([_assign("AUTOSCALER_V2", "1" if v2 else "0")] if role == "head" else []),
        # A node Pulumi keeps names itself to v2 as its type's pinned twin (still in the
        # type's node group); empty under v1, which counts it as it is.
        _assign("PINNED_TYPE_NAME", pinned.twin(node_type) if v2 else ""),
        _assign("PINNED_LABELS_JSON",
                _json({**type_config.labels, pinned.NODE_GROUP_LABEL: node_type}) if v2 else ""),
        'HEAD_RESOLVE_TRIES=${RAY_BOOTSTRAP_RESOLVE_TRIES:-120}',
        'HEAD_RESOLVE_DELAY=${RAY_BOOTSTRAP_RESOLVE_DELAY:-5}',
        "",
    ]
    return "\n".join(lines)


def _steps(config: ClusterConfig, role: Role, node_type: str,
           mounts: FileMountArchive | None, data: str) -> str:
    """The ordered stages. Each changeable stage carries the hash of what it runs (and of the
    node data it reads), so a re-apply reruns only stages whose hash differs from the one the
    node recorded (see node_reapply.sh); `prepare`, `head-address` and `ray-auth` always run."""
    docker = bool(config.docker.enabled)
    docker_data = _data_of(data, ("DOCKER_",))
    lines = []
    if role == "head":  # the same script, run detached, is the head's config watcher
        lines += [f'if [ "${{1:-}}" = {WATCH_CONFIG_ARG} ]; then',
                  '    open_log', '    watch_config "$2" "${3:-}"', "    exit", "fi", ""]
    lines += [f'if [ "${{1:-}}" = {WATCH_SCRIPT_ARG} ]; then',
              "    open_log", "    watch_script", "    exit", "fi",
              f'if [ "${{1:-}}" = {REAPPLY_ARG} ]; then', '    begin_reapply "${2:-full}"', "fi",
              ""]
    lines += ["# ---- the steps, in order", "open_log", 'log "bootstrap starts"']
    lines += ["begin_stage prepare", "prepare_node"]
    # The archive's name is its content's hash: new files, a new stage hash, a re-apply.
    fetch = [] if mounts is None else [
        f"fetch_file_mounts {_quote(mounts.object_name)}",
        *(f"place_file_mount {index} {_quote(target)}"
          for index, target in enumerate(mounts.targets)),
        "drop_file_mounts",
    ]
    lines += _stage("file-mounts", fetch, docker_data)
    if role == "head":
        lines += _stage("bootstrap-files", ["write_bootstrap_files"])
        # The package's hash: a new provider, a re-run, a Ray restart.
        lines += _stage("head-provider", [f"install_head_provider {_quote(payload_digest())}"])
    lines += _stage("initialization", [
        f"run_host {_quote(c)}" for c in config.initialization_commands_for(role, node_type)
    ])
    if docker:
        lines += _stage("docker-pull", ["docker_pull"], docker_data)
        start = " ".join(["docker_start", *map(_quote, docker_run_words(config, role, node_type))])
        run = [start] + (["docker_copy_bootstrap_files"] if role == "head" else [])
        lines += _stage("docker-run", run, docker_data)
    lines += ["begin_stage head-address", "resolve_head_ip"]
    # Every boot and re-apply: the token file is read afresh and its env follows RAY_HEAD_IP's.
    lines += ["begin_stage ray-auth", "write_auth_token"]
    lines += _stage("setup", [f"run_node {_quote(c)}"
                              for c in config.setup_commands_for(role, node_type)])
    start = ["begin_stage ray-stop", "stop_ray", "begin_stage ray-start", "export_resources",
             "export_ray_identity", *(["export_head_provider"] if role == "head" else []),
             *[f"run_node {_quote(c)}" for c in config.start_commands_for(role)], "ray_started"]
    lines += [f"if restart_ray {_quote(_hash(start, _data_of(data, _START_DATA)))}; then",
              *(f"    {line}" for line in start), "fi"]
    if role == "head":
        lines += ["begin_stage config-watcher", "start_config_watcher"]
        lines += ["begin_stage autostop", "start_autostop"]
    lines += ["begin_stage node-watcher", "start_node_watcher"]
    lines += ["report_applied", "finish", ""]
    return "\n".join(lines)


def docker_run_words(config: ClusterConfig, role: Role, node_type: str) -> list[str]:
    """The node's `docker run` options as argv words. Ray pastes them into a shell command
    line; we split them with the shell's word rules here, at plan time, and the script passes
    the words to docker as quoted data: quotes group as in a shell, and nothing in them
    (`$(...)`, backticks, `;`, `|`, `&&`, `$VAR`) is ever run or expanded on the node."""
    return shlex.split(" ".join(config.docker_run_options_for(role, node_type)))


# The node data `ray start` reads (through export_resources and export_ray_identity).
_START_DATA = ("NODE_IS_TPU=", "RESOURCES_JSON", "LABELS_JSON=", "AUTOSCALER_V2=",
               "NODE_RAY_TOKEN_AUTH=", "PINNED_")


def _data_of(data: str, prefixes: tuple[str, ...]) -> str:
    """The node data lines a stage reads: a change elsewhere does not rerun it."""
    return "\n".join(line for line in data.splitlines() if line.startswith(prefixes))


def _stage(name: str, body: list[str], extra: str = "") -> list[str]:
    """`if stage NAME HASH; then BODY; stage_done; fi`: run at boot, on re-apply when changed."""
    return [f"if stage {name} {_quote(_hash(body, extra))}; then",
            *(f"    {line}" for line in body), "    stage_done", "fi"]


def _hash(lines: list[str], extra: str = "") -> str:
    return hashlib.sha256(("\n".join(lines) + "\0" + extra).encode()).hexdigest()[:16]


def script_version(script: str) -> str:
    """The `SCRIPT_VERSION` a rendered script carries: what a node reports once applied."""
    match = re.search(r"^SCRIPT_VERSION='([0-9a-f]+)'$", script, re.MULTILINE)
    if match is None:
        raise ValueError("not a rendered startup script: it has no SCRIPT_VERSION line")
    return match.group(1)


def _json(value: dict) -> str:
    return json.dumps(value, sort_keys=True) if value else ""


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _has_shm_option(run_words: list[str]) -> bool:
    return any(word.startswith("--shm-size") for word in run_words)
