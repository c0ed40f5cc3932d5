"""Run a rendered startup script for real, with stub `ray`, `docker` and `getent` on PATH.

Each stub appends one line `<name> <args>` to a calls file, so tests read back exactly which
commands the script ran and in what order. User commands in the test configs call `record`.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.config import ClusterConfig, parse_cluster_config

REPO = Path(__file__).resolve().parent.parent
SHIPPED_STACKS = sorted((REPO / "stacks" / "clusters").glob("*.yaml"))
HEAD_INTERNAL_IP = "10.128.0.7"

_RECORD = 'printf \'%s\\n\' "$(basename "$0") $*" >> "$STUB_CALLS"\n'
STUBS = {
    "record": "#!/bin/sh\n" + _RECORD,
    "ray": "#!/bin/sh\n" + _RECORD + 'printf \'ray-env HEAD=%s RES=%s\\n\' '
    '"${RAY_HEAD_IP:-}" "${RAY_OVERRIDE_RESOURCES:-}" >> "$STUB_CALLS"\n',
    # `docker inspect` answers from STUB_CONTAINER ("true <image>" = running); `image
    # inspect` fails unless STUB_IMAGE_PRESENT=1; `exec` runs the command here.
    "docker": "#!/bin/sh\n" + _RECORD + """case $1 in
  inspect) [ -n "${STUB_CONTAINER:-}" ] && printf '%s\\n' "$STUB_CONTAINER" && exit 0; exit 1 ;;
  image) [ "${STUB_IMAGE_PRESENT:-}" = 1 ] && exit 0; exit 1 ;;
  exec) exec bash -c "$6" ;;  # exec <name> /bin/bash --login -c CMD; keep the stub PATH
esac
""",
    "getent": "#!/bin/sh\n" + _RECORD + f"""[ "$2" = "$STUB_HEAD_NAME" ] || exit 2
printf '%s     %s\\n' {HEAD_INTERNAL_IP} "$2"
""",
}


def cluster(**overrides: Any) -> ClusterConfig:
    """A small two-type cluster whose commands only call the `record` stub."""
    data: dict[str, Any] = {
        "cluster_name": "stubbed",
        "provider": {"type": "gcp", "region": "us-west1", "availability_zone": "us-west1-a",
                     "project_id": "my-gcp-project"},
        "available_node_types": {
            "head_t": {"resources": {"CPU": 2}, "node_config": {"machineType": "n1-standard-2"}},
            "worker_t": {"resources": {"CPU": 4, "custom": 1}, "min_workers": 1,
                         "node_config": {"machineType": "n1-standard-2"}},
        },
        "head_node_type": "head_t",
        "initialization_commands": ["record init-1"],
        "setup_commands": ["record setup-common"],
        "head_setup_commands": ["record setup-head"],
        "worker_setup_commands": ["record setup-worker"],
        "head_start_ray_commands": ["ray start --head --port=6379"],
        "worker_start_ray_commands": ["ray start --address=$RAY_HEAD_IP:6379"],
    }
    data.update(overrides)
    return parse_cluster_config(data)


@dataclass
class ScriptRun:
    returncode: int
    calls: list[str]
    log: str
    status: str
    home: Path


def run_script(
    script: str,
    tmp_path: Path,
    metadata: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> ScriptRun:
    """Run `script` in local mode (metadata from a directory) with the stubs first on PATH."""
    stub_dir, metadata_dir = tmp_path / "stubs", tmp_path / "metadata"
    stub_dir.mkdir(exist_ok=True)
    metadata_dir.mkdir(exist_ok=True)
    for name, text in STUBS.items():
        (stub_dir / name).write_text(text)
        (stub_dir / name).chmod(0o755)
    for key, value in {"startup-script": script, **(metadata or {})}.items():
        (metadata_dir / key).write_text(value)
    calls, log, home = tmp_path / "calls", tmp_path / "bootstrap.log", tmp_path / "home"
    full_env = {k: v for k, v in os.environ.items() if k != "RAY_HEAD_IP"}
    full_env.update({
        "PATH": f"{stub_dir}:{os.environ['PATH']}",
        "STUB_CALLS": str(calls),
        "STUB_HEAD_NAME": "ray-stubbed-head-1a2b3c4d-compute",
        "RAY_BOOTSTRAP_METADATA_DIR": str(metadata_dir),
        "RAY_BOOTSTRAP_HOME": str(home),
        "RAY_BOOTSTRAP_LOG": str(log),
        "RAY_BOOTSTRAP_STATUS_DIR": str(tmp_path / "guest-attributes"),
        "RAY_BOOTSTRAP_RESOLVE_DELAY": "0",
        **(env or {}),
    })
    result = subprocess.run(["sh", str(metadata_dir / "startup-script")], env=full_env,
                            capture_output=True, text=True, timeout=60)
    status_file = tmp_path / "guest-attributes" / "ray-bootstrap" / "status"
    return ScriptRun(
        result.returncode,
        calls.read_text().splitlines() if calls.exists() else [],
        log.read_text() if log.exists() else "",
        status_file.read_text() if status_file.exists() else "",
        home,
    )
