"""A real OpenSSH sshd on 127.0.0.1 for tests and bench, and stack outputs pointing at it.

Keys are generated per run in a temp dir; nothing touches ~/.ssh. The pytest fixtures over
this live in sshd_fixture.py.
"""

from __future__ import annotations

import contextlib
import getpass
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.warm_python import run_module

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def keygen(path: Path, kind: str = "ed25519") -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "test", "-f", str(path)], check=True
    )
    return path


class LocalSshd:
    """sshd -D -e with its own host key, authorized key and config in `workdir`.

    `set_env` goes to sshd's SetEnv, which overrides the session's defaults: HOME there gives
    the remote shells a home of the test's own (its .profile, tmux sockets), PATH a known PATH.
    `keys_lines` replace the authorized_keys file (e.g. an AuthorizedKeysCommand, as an OS
    Login VM's guest agent sets).
    """

    def __init__(self, workdir: Path, set_env: dict[str, str] | None = None,
                 keys_lines: list[str] | None = None,
                 addresses: tuple[str, ...] = ("127.0.0.1",), port: int | None = None,
                 user_key: Path | None = None) -> None:
        """`addresses`: the loopback addresses to listen on (sshd takes 16 at most), on
        `port` (a free one by default); `user_key`: another sshd's, so one key logs in to
        all of them."""
        self.workdir = workdir
        self.chosen_port = port
        self.port = port or free_port()
        self.addresses = addresses
        self.user = getpass.getuser()
        self.host_key = keygen(workdir / "host_ed25519")
        self.user_key = user_key or keygen(workdir / "user_ed25519")
        (workdir / "authorized_keys").write_text(Path(f"{self.user_key}.pub").read_text())
        self.config = workdir / "sshd_config"
        self.set_env = set_env
        self.keys_lines = keys_lines
        self._write_config()
        self.process: subprocess.Popen[bytes] | None = None

    def _write_config(self) -> None:
        # one line: sshd keeps the first SetEnv it reads
        set_env_lines = (["SetEnv " + " ".join(f'"{k}={v}"' for k, v in self.set_env.items())]
                         if self.set_env else [])
        self.config.write_text(
            "\n".join([
                f"Port {self.port}",
                *(f"ListenAddress {address}" for address in self.addresses),
                f"HostKey {self.host_key}",
                f"PidFile {self.workdir / 'sshd.pid'}",
                *(self.keys_lines or [f"AuthorizedKeysFile {self.workdir / 'authorized_keys'}"]),
                "StrictModes no",
                "UsePAM no",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "AllowTcpForwarding yes",
                "PermitTTY yes",
                "X11Forwarding no",
                "PrintMotd no",
                "MaxStartups 200",
                "MaxSessions 100",
                "Subsystem sftp internal-sftp",
                *set_env_lines,
                "",
            ])
        )

    @property
    def private_key(self) -> str:
        return self.user_key.read_text()

    def start(self) -> LocalSshd:
        """sshd started and listening on each address; ready when its log says so, not when a
        connection to the port succeeds: a port taken meanwhile by another worker's server
        answers that too, while ours exits on "Address already in use" (its tests then met
        that server's host key). Then a free port again, when the test chose none."""
        if os.geteuid() == 0:
            # privilege separation dir: packages create it at boot, containers often lack it
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        for _ in range(5):
            if self._listening():
                return self
            self.port = free_port()
            self._write_config()
        raise RuntimeError(f"sshd found no free port: {self._log()}")

    def _log(self) -> str:
        return (self.workdir / "sshd.log").read_text(errors="replace")

    def _listening(self) -> bool:
        """Whether this launch listens; False when its port was taken and another may be
        tried."""
        with (self.workdir / "sshd.log").open("wb") as log_file:  # sshd keeps its own copy
            self.process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config)],
                stdout=subprocess.DEVNULL,
                stderr=log_file,
            )
        said = [f"Server listening on {address} port {self.port}." for address in self.addresses]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            log = self._log()
            if self.process.poll() is not None:
                if "Address already in use" in log and self.chosen_port is None:
                    return False
                raise RuntimeError(f"sshd exited with {self.process.returncode}: {log}")
            if all(line in log for line in said):
                return True
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"sshd did not start listening: {self._log()}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> LocalSshd:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def pin_host_key(state_dir: Path, stack: str, sshd: LocalSshd,
                 host: str = "127.0.0.1") -> None:
    """What a user's first `--trust-first-use` leaves: the sshd's host key pinned in the
    stack's known_hosts under `host` (an address, or a tunnelled head's instance name), the
    test knowing the key (no GCE publishes it)."""
    directory = state_dir / stack
    directory.mkdir(parents=True, mode=0o700, exist_ok=True)
    public = Path(f"{sshd.host_key}.pub").read_text().split()
    with (directory / "known_hosts").open("a") as pins:
        pins.write(f"[{host}]:{sshd.port} {public[0]} {public[1]}\n")


def stack_outputs_for(sshd: LocalSshd, cluster_file: str = "", **overrides) -> dict:
    """The outputs contract of the Pulumi program, with head and worker both this sshd."""
    outputs = {
        "cluster_name": "local",
        "project": "test-project",
        "zone": "us-west1-a",
        "head_name": "ray-local-head-0000",
        "head_internal_ip": "127.0.0.1",
        "head_external_ip": "127.0.0.1",
        "ssh_user": sshd.user,
        "ssh_private_key": sshd.private_key,
        "ssh_port": sshd.port,
        "service_account_email": "ray-autoscaler-sa-v1@test-project.iam.gserviceaccount.com",
        "docker_container_name": "",
        "dashboard_url": "http://127.0.0.1:8265",
        "cluster_config_file": cluster_file,
        "nodes": [
            {"name": "ray-local-head-0000", "node_type": "ray_head_default", "kind": "head",
             "internal_ip": "127.0.0.1", "external_ip": "127.0.0.1", "status": "RUNNING"},
            {"name": "ray-local-worker-0001", "node_type": "ray_worker_small", "kind": "worker",
             "internal_ip": "127.0.0.1", "external_ip": None, "status": "RUNNING"},
        ],
    }
    outputs.update(overrides)
    return outputs


@dataclass
class TestStack:
    """A stack whose outputs point at the local sshd; `env` is for `invoke` subprocesses."""

    __test__ = False
    name: str
    outputs_file: Path
    state_dir: Path
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)

    def write_outputs(self, outputs: dict) -> None:
        self.outputs_file.write_text(json.dumps(outputs))

    def invoke(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`invoke ARGS` from the project root, as a user types it."""
        return run_module(["invoke", *args], cwd=PROJECT_ROOT, env=env or self.env, timeout=120)

    def spawn_args(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "invoke", *args]


CLUSTER_YAML = """\
cluster_name: local
provider: {type: gcp, region: us-west1, availability_zone: us-west1-a, project_id: test-project}
auth: {ssh_user: ubuntu}
rsync_exclude: ["**/.git", "*.pyc", "build/"]
rsync_filter: [".gitignore"]
file_mounts:
  "{remote}": "{local}"
"""


@contextlib.contextmanager
def http_server(body: bytes) -> Iterator[int]:
    """A web server on 127.0.0.1 answering every GET with `body`, its port: what a port forward
    to a node reaches (the nodes of these tests are this machine)."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            """Quiet: the tests read what the forward brings back."""

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
