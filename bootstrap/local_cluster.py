"""A two-node Ray cluster on this machine, built by the same startup scripts a GCE node runs.

The head's and a worker's rendered scripts run as the current user with their metadata read
from a directory (`RAY_BOOTSTRAP_METADATA_DIR`), `~` and the log in a per-node directory, and
Ray's files under one `RAY_TMPDIR`, so teardown stops exactly this cluster's processes.
Every started cluster is recorded until it is torn down, so `local-down` stops all that
`local-up --keep` left running, not only the last. Each cluster runs with Ray's token
authentication (`RAY_AUTH_MODE=token`), its random token in a file only this user can read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import yaml

from bootstrap.autoscaler_config import autoscaler_config
from bootstrap.file_mounts import FileMountArchive, pack_file_mounts
from bootstrap.local_processes import any_alive, become_subreaper, stop_processes
from bootstrap.node_metadata import BOOTSTRAP_CONFIG_KEY, HEAD_ADDRESS_KEY, node_metadata
from model.config import ClusterConfig
from model.private_files import write_private_file
from model.stack_config import state_base, writable_folder

Progress = Callable[[str], None]
PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = PROJECT_ROOT / "stacks" / "clusters" / "local.yaml"
TAG_ENV = "RAY_GCP_LOCAL_CLUSTER"  # in every process a local cluster starts: its folder


class LocalClusterError(RuntimeError):
    """A local node failed to start or the cluster did not come up in time."""


def _quiet(_: str) -> None:
    pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def node_ip_address() -> str:
    """The address `ray start` picks for this machine, so head and worker agree."""
    from ray._private.services import get_node_ip_address

    return get_node_ip_address()


@dataclass(frozen=True)
class LocalNode:
    role: Literal["head", "worker"]
    node_type: str
    directory: Path

    @property
    def log_file(self) -> Path:
        return self.directory / "ray-bootstrap.log"

    @property
    def status_file(self) -> Path:
        return self.directory / "guest-attributes" / "ray-bootstrap" / "status"

    @property
    def home(self) -> Path:
        return self.directory / "home"


@dataclass
class LocalCluster:
    """One local cluster: where its files live and the ports it uses."""

    root: Path
    node_ip: str
    gcs_port: int
    dashboard_port: int
    client_port: int

    @classmethod
    def create(cls, root: Path | None = None) -> LocalCluster:
        # Short root: Ray's Unix socket paths live below it and must stay under 108 bytes.
        root = root or Path(tempfile.mkdtemp(prefix="rgl-", dir="/tmp"))
        root.mkdir(parents=True, exist_ok=True)
        cluster = cls(root, node_ip_address(), free_port(), free_port(), free_port())
        cluster.write_auth_token()
        return cluster

    @property
    def auth_token_path(self) -> Path:
        """The cluster's Ray auth token: random, readable by this user only."""
        return self.root / "auth_token"

    def write_auth_token(self) -> None:
        descriptor = os.open(self.auth_token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as token_file:
            token_file.write(secrets.token_hex(32))

    @property
    def address(self) -> str:
        return f"{self.node_ip}:{self.gcs_port}"

    @property
    def ray_tmpdir(self) -> Path:
        return self.root / "t"

    def node(self, role: Literal["head", "worker"], node_type: str) -> LocalNode:
        return LocalNode(role, node_type, self.root / role)

    def ray_env(self) -> dict[str, str]:
        """What every Ray command of this cluster runs with (scripts, `ray status`).

        The `ray` the node scripts run is the one installed beside this Python (the project's
        environment), first on PATH, so an environment that is not activated still serves."""
        env = {k: v for k, v in os.environ.items() if k != "RAY_HEAD_IP"}
        env.update({
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            "RAY_TMPDIR": str(self.ray_tmpdir),
            "RAY_GCS_PORT": str(self.gcs_port),
            "RAY_DASHBOARD_PORT": str(self.dashboard_port),
            "RAY_CLIENT_PORT": str(self.client_port),
            "RAY_USAGE_STATS_ENABLED": "0",
            # Under `uv run` (the README's command) Ray would otherwise start every worker with
            # `uv run` in an uploaded copy of the working directory; the nodes already run in
            # this environment, and that `uv` need not be on PATH.
            "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
            # Ray's token authentication: every node, `ray status` and the driver present the
            # cluster's token; a client without it is refused.
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(self.auth_token_path),
            # what local_processes finds the cluster's own processes by (with markers)
            TAG_ENV: str(self.root),
        })
        env.pop("RAY_AUTH_TOKEN", None)
        return env

    def markers(self) -> list[str]:
        """Command-line text that names this cluster's processes (see local_processes)."""
        return [str(self.root), f"--address={self.address}"]

    def tag(self) -> str:
        """The environment entry every process this cluster starts holds."""
        return f"{TAG_ENV}={self.root}"

    # ------------------------------------------------------------------ nodes

    @property
    def bucket(self) -> Path:
        """The cluster's bucket: a folder holding each object under its name."""
        return self.root / "bucket"

    def start_node(self, config: ClusterConfig, node: LocalNode, progress: Progress,
                   mounts: FileMountArchive | None = None) -> None:
        """Write the node's metadata, then run its rendered startup script to the end; it
        fetches the file_mounts archive `mounts` from the cluster's bucket folder."""
        metadata_dir = node.directory / "metadata"
        metadata_dir.mkdir(parents=True, exist_ok=True)
        entries = node_metadata(config, node.role, node.node_type, mounts)
        if node.role == "head":
            bodies = {name: t.node_config.body() for name, t in config.available_node_types.items()}
            entries[BOOTSTRAP_CONFIG_KEY] = yaml.safe_dump(autoscaler_config(config, bodies))
        else:
            # A worker learns the head's address from metadata, as on GCE.
            entries[HEAD_ADDRESS_KEY] = self.node_ip
        for key, value in entries.items():
            (metadata_dir / key).write_text(value)
        env = self.ray_env()
        env.update({
            "RAY_BOOTSTRAP_METADATA_DIR": str(metadata_dir),
            "RAY_BOOTSTRAP_HOME": str(node.home),
            "RAY_BOOTSTRAP_LOG": str(node.log_file),
            "RAY_BOOTSTRAP_STATUS_DIR": str(node.directory / "guest-attributes"),
            "RAY_BOOTSTRAP_SKIP_RAY_STOP": "1",
            "RAY_BOOTSTRAP_BUCKET_DIR": str(self.bucket),
        })
        if node.role == "head":
            env["RAY_HEAD_IP"] = self.node_ip
        else:  # the worker's node watcher follows the head's Ray restarts (node_reapply.sh)
            env["RAY_BOOTSTRAP_HEAD_STATUS_DIR"] = str(self.root / "head" / "guest-attributes")
        progress(f"{node.role}: running its startup script (log: {node.log_file})")
        script = metadata_dir / "startup-script"
        process = subprocess.Popen(["sh", str(script)], env=env, stdin=subprocess.DEVNULL)
        shown = ""
        while process.poll() is None:  # show each stage as the script reports it
            status = read_status(node)
            if status != shown and status != "unknown":
                progress(f"{node.role}: {status}")
                shown = status
            time.sleep(0.2)
        if process.returncode != 0:
            raise LocalClusterError(
                f"the {node.role} startup script failed (exit {process.returncode}, status "
                f"{read_status(node)!r}); last log lines:\n{log_tail(node)}"
            )
        progress(f"{node.role}: {read_status(node)}")

    def active_nodes(self) -> int:
        """How many nodes `ray status` lists as active (0 while it cannot answer)."""
        result = subprocess.run(
            ["ray", "status", f"--address={self.address}"],
            env=self.ray_env(), capture_output=True, text=True,
        )
        return count_active_nodes(result.stdout) if result.returncode == 0 else 0

    def wait_for_nodes(self, count: int, progress: Progress, timeout: float = 180) -> None:
        started = time.monotonic()
        while True:
            active = self.active_nodes()
            elapsed = time.monotonic() - started
            progress(f"ray status: {active}/{count} nodes active ({elapsed:.0f}s)")
            if active >= count:
                return
            if elapsed > timeout:
                raise LocalClusterError(
                    f"only {active} of {count} nodes active after {timeout:.0f}s: see the "
                    f"logs under {self.root}"
                )
            time.sleep(0.5)

    def run_program(self) -> dict:
        """Run the small two-node Ray program; its JSON report."""
        result = subprocess.run(
            [sys.executable, "-m", "bootstrap.local_program", self.address],
            env=self.ray_env(), capture_output=True, text=True, timeout=300,
            cwd=Path(__file__).resolve().parent.parent,
        )
        if result.returncode != 0:
            raise LocalClusterError(f"the Ray program failed:\n{result.stderr[-3000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    def down(self) -> set[int]:
        """Stop this cluster's processes and delete its files; the stopped pids."""
        stopped = stop_processes(self.markers(), self.tag())
        shutil.rmtree(self.root, ignore_errors=True)
        with _records() as clusters:
            clusters[:] = [cluster for cluster in clusters if cluster != self]
        return stopped

    def save_state(self) -> None:
        with _records() as clusters:
            clusters.append(self)


def state_file() -> Path:
    """The record of running local clusters: `.ray-gcp/local-clusters.json` in the project,
    or under $RAY_GCP_STATE_DIR."""
    return writable_folder(state_base()) / "local-clusters.json"


@contextlib.contextmanager
def _records() -> Iterator[list[LocalCluster]]:
    """The recorded clusters, to read or change under an exclusive lock."""
    path = state_file()
    lock = os.open(path.with_suffix(".lock"), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
                   | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        clusters = load_states()
        yield clusters
        write_private_file(path, json.dumps([{**asdict(c), "root": str(c.root)}
                                             for c in clusters]))
    finally:
        os.close(lock)


def load_states() -> list[LocalCluster]:
    try:
        entries = json.loads(state_file().read_text())
        return [LocalCluster(**{**entry, "root": Path(entry["root"])}) for entry in entries]
    except (OSError, ValueError, TypeError, KeyError):
        return []


def read_status(node: LocalNode) -> str:
    try:
        return node.status_file.read_text()
    except OSError:
        return "unknown"


def log_tail(node: LocalNode, lines: int = 20) -> str:
    try:
        return "\n".join(node.log_file.read_text().splitlines()[-lines:])
    except OSError:
        return "(no log)"


# Autoscaler v1 lists every running node under `Active:`; v2 lists the ones doing nothing under
# `Idle:` (ray/autoscaler/v2/utils.py, ClusterStatusFormatter): both are up.
_UP_SECTIONS = re.compile(r"^(?:Active|Idle):\n(?P<body>(?:[ \t]+.*\n?)*)", re.MULTILINE)
_NODE_LINE = re.compile(r"^\s+(\d+)\s+\S+", re.MULTILINE)


def count_active_nodes(status_output: str) -> int:
    """Sum the counts under `Active:` and `Idle:` in `ray status` output (`(no active nodes)`
    is 0): the nodes that are up, whichever autoscaler wrote the status."""
    return sum(int(count) for match in _UP_SECTIONS.finditer(status_output)
               for count in _NODE_LINE.findall(match.group("body")))


def worker_type_of(config: ClusterConfig) -> str:
    others = [name for name in config.worker_types if name != config.head_node_type]
    if not others:
        raise LocalClusterError("the local cluster needs a worker node type besides the head's")
    return others[0]


def local_up(
    config: ClusterConfig,
    progress: Progress = _quiet,
    root: Path | None = None,
    base_dir: Path = PROJECT_ROOT,
) -> LocalCluster:
    """Start head then worker through their startup scripts; return once both are active.
    On any failure everything started so far is torn down. Relative file_mounts sources are
    read from `base_dir` (the project folder, where `invoke` runs); the archive goes into the
    cluster's bucket folder, as the program puts it in the cluster's bucket on GCP."""
    packed = pack_file_mounts(config, base_dir)
    # Named with a key of this cluster's own, as a stack's archive with the stack's secret.
    mounts = packed.keyed(secrets.token_hex(32)) if packed is not None else None
    become_subreaper()
    cluster = LocalCluster.create(root)
    cluster.save_state()
    try:
        if mounts is not None:
            mounts.write(cluster.bucket / Path(mounts.object_name).parent)
        cluster.start_node(config, cluster.node("head", config.head_node_type), progress, mounts)
        cluster.start_node(config, cluster.node("worker", worker_type_of(config)), progress,
                           mounts)
        cluster.wait_for_nodes(2, progress)
    except BaseException:
        cluster.down()
        raise
    return cluster


def try_local_cluster(config: ClusterConfig, keep: bool, progress: Progress = _quiet) -> None:
    """`invoke local-up`: start the cluster, run a task on each node and say whether it ran
    there, then tear the cluster down unless `keep`."""
    cluster = local_up(config, progress)
    try:
        report = cluster.run_program()
        for node in report["nodes"]:
            ran = report["task_ran_on"].get(node["node_id"]) == node["node_id"]
            progress(f"node {node['node_id'][:12]}: task ran there: {ran}")
        progress(f"local cluster up at {cluster.address}")
    finally:
        if not keep:
            progress(f"tearing down: stopped {len(cluster.down())} processes")


def local_down(progress: Progress = _quiet) -> bool:
    """Tear down every cluster a kept `local-up` left running; False when there is none or
    a process survived."""
    clusters = load_states()
    if not clusters:
        progress("no local cluster recorded: nothing to stop")
        return False
    survived = False
    for cluster in clusters:
        if not cluster.root.exists():
            # Its files are gone, so are its processes: do not match another cluster that
            # reuses its port since.
            with _records() as recorded:
                recorded[:] = [other for other in recorded if other != cluster]
            progress(f"the local cluster at {cluster.address} was already gone")
            continue
        stopped = cluster.down()
        survived |= any_alive(stopped)
        progress(f"stopped {len(stopped)} processes of the local cluster at {cluster.address}")
    return not survived
