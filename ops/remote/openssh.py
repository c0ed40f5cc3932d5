"""The system's OpenSSH, for bulk transfers at its speed: `ssh` argv that reaches a
node exactly as ops.remote.ssh's Connector does, and is as strict about its host key.

- Host key: a temporary known_hosts file (0600, in the stack's 0700 state folder, removed
  after) holding exactly the key pinned for the node (what the Connector verified on first
  contact), under a HostKeyAlias, with StrictHostKeyChecking=yes and neither the user's nor
  the system's known_hosts: any other key is refused, nothing new is ever accepted. A node
  with nothing pinned yet is first reached through the Connector, which checks and pins.
- The key: the stack's private key in an anonymous memory file (memfd, 0600) that `ssh -i`
  reads through /proc/<pid>/fd; it never reaches the disk. IdentitiesOnly, no agent, no
  ~/.ssh/config (`-F /dev/null`), BatchMode (never a prompt).
- The way in: the same user (OS Login's when the stack uses it), port and ProxyCommand (IAP
  in private mode) as the Connector; a worker through the head (`ssh -W` in a ProxyCommand,
  the head's key checked the same way).
- Warm, as exec is (ops.remote.warm): with $RAY_GCP_SSH_PERSIST above 0, OpenSSH's own
  ControlMaster, kept for as many idle seconds. Its socket is in the user's 0700
  `ray-gcp-<uid>` folder (in $XDG_RUNTIME_DIR or the temp folder: a state folder is often too
  deep for a unix socket's 108 bytes), named for the stack's state folder, the node, user,
  address and pinned key (a key pinned anew gets a new master, which checks it); OpenSSH
  makes it 0600 and serves only its user.
- AES-GCM first among the ciphers (`Ciphers=^aes128-gcm@openssh.com`): with AES
  instructions it moves bulk data faster than OpenSSH's default ChaCha20.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ops.errors import OpsError
from ops.remote.known_hosts import host_key_name, pin_digest, pinned_key
from ops.remote.ssh import Connector
from ops.remote.ssh_proxy import head_host, proxy_command
from ops.stacks.background import idle_seconds
from ops.stacks.stack import Node

FAN_OUT_KEX = ["-o", "KexAlgorithms=^curve25519-sha256"]
"""A fan-out's key exchange first: OpenSSH 9's default, the sntrup761x25519 hybrid, costs
about 70 ms of CPU here per connection (measured: 100 nodes, 8.0 s against 1.3 s of CPU),
and paramiko, which exec uses, offers curve25519 alone anyway."""
CONTROL_PATH_MAX = 88  # OpenSSH binds `path.` + 16 random characters first, in 108 bytes
TRANSFER_ENV = "RAY_GCP_SYNC"
"""`sftp`: never use the system's ssh for a sync (paramiko's SFTP, as when ssh is missing)."""


def system_ssh() -> str | None:
    """The path of `ssh` on PATH; None when it is missing, or when $RAY_GCP_SYNC=sftp asks
    for paramiko's SFTP."""
    if os.environ.get(TRANSFER_ENV, "") == "sftp":
        return None
    return shutil.which("ssh")


class OpenSsh:
    """`ssh` argv for the nodes of `connector`'s stack, valid while the block runs. In a
    `fan_out` (many nodes at once) the workers go through one master connection to the head
    (`head_master`), reuse their own live masters but start none, and prefer classic
    curve25519 key exchange."""

    def __init__(self, connector: Connector, ssh: str, workdir: Path,
                 fan_out: bool = False) -> None:
        self.connector = connector
        self.ssh = ssh
        self.workdir = workdir
        self.key_path = ""
        self.known_hosts = workdir / "known_hosts"
        self.fan_out = fan_out
        self.head_master: Path | None = None
        """The head's master socket a fan-out goes through (`start_head_master`)."""
        self._own_master = False  # that master is this run's own, ended with it
        self._kept: dict[str, Path] = {}  # node -> its kept master's socket, as offered

    def head_target(self) -> tuple[str, list[str]]:
        """(host, ssh options) of the head."""
        outputs = self.connector.outputs
        proxy = proxy_command(outputs)
        host = head_host(outputs, proxy)
        options = self._options("head", host, outputs.head_name)
        if proxy:
            options += ["-o", f"ProxyCommand={_escape(proxy)}"]
        return host, options

    def target(self, node: Node) -> tuple[str, list[str]]:
        """(host, ssh options) of `node`; a worker is reached through the head."""
        outputs = self.connector.outputs
        if node.kind == "head" or node.name == outputs.head_name:
            return self.head_target()
        head_host, head_options = self.head_target()
        jump = [self.ssh, *head_options, "-W", f"{node.internal_ip}:{outputs.ssh_port}",
                head_host]
        return node.internal_ip, [*self._options(f"node-{node.name}", node.internal_ip,
                                                 node.name),
                                  "-o", f"ProxyCommand={_escape(shlex.join(jump))}"]

    def _options(self, alias: str, host: str, name: str) -> list[str]:
        """Options that check the node's key against its pin only, under `alias`."""
        outputs = self.connector.outputs
        host_name = host_key_name(host, outputs.ssh_port)
        key = pinned_key(self.connector.known_hosts, host_name)
        if key is None:
            node = next((n for n in outputs.nodes if n.name == name), None)
            self.connector.node(node) if node else self.connector.head()  # checks and pins
            key = pinned_key(self.connector.known_hosts, host_name)
        if key is None:  # the Connector connected, so this cannot be: refuse, never guess
            raise OpsError(f"no host key is pinned for {host_name} in "
                           f"{self.connector.known_hosts}: refusing to transfer")
        with self.known_hosts.open("a") as pins:
            pins.write(f"{alias} {key}\n")
        return [*self._control(name, host_name, key), *(FAN_OUT_KEX if self.fan_out else []),
            "-F", "/dev/null", "-i", self.key_path, "-o", "IdentitiesOnly=yes",
            "-o", "IdentityAgent=none", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes",
            "-o", "UpdateHostKeys=no", "-o", "CheckHostIP=no", "-o", f"HostKeyAlias={alias}",
            "-o", f"ConnectTimeout={int(self.connector.timeout)}",
            "-o", "Ciphers=^aes128-gcm@openssh.com",
            "-p", str(outputs.ssh_port), "-l", self.connector.login_user(),
        ]


    def _control(self, name: str, host_name: str, key: str) -> list[str]:
        """ControlMaster options for the node, or none (no persistence, or no private
        folder with a short enough path for its socket). In a fan-out: the head through the
        master this run holds, a worker through its own live one if any (none started: a
        background process per node is no cache at a hundred nodes)."""
        if self.fan_out and name == self.connector.outputs.head_name and self.head_master:
            return ["-o", "ControlMaster=no", "-o", f"ControlPath={_escape(str(self.head_master))}"]
        idle = idle_seconds()
        path = self._control_path(name, host_name, key) if idle > 0 else None
        if path is None:
            return []
        if self.fan_out and name != self.connector.outputs.head_name:
            return ["-o", "ControlMaster=no", "-o", f"ControlPath={_escape(str(path))}"]
        self._kept[name] = path
        return ["-o", "ControlMaster=auto", "-o", f"ControlPath={_escape(str(path))}",
                "-o", f"ControlPersist={max(1, int(idle))}"]

    def _control_path(self, name: str, host_name: str, key: str) -> Path | None:
        """Where node `name`'s kept master listens; None without a short enough private
        folder for it."""
        folder = control_folder()
        if folder is None:
            return None
        user = self.connector.outputs.ssh_user
        node = pin_digest(name, user, host_name, key)[:12]
        path = folder / f"{control_prefix(self.connector.known_hosts)}-{node}"
        return path if len(str(path)) <= CONTROL_PATH_MAX else None

    def start_head_master(self) -> None:
        """One master connection to the head for this run, that every worker's `ssh -W`
        goes through (one handshake with the jump host, not one per worker): the head's
        kept master when $RAY_GCP_SSH_PERSIST keeps them (started if none is alive), else
        one of this run's own, ended by `stop_head_master` (or a minute idle, if this
        process is killed first)."""
        host, options = self.head_target()
        kept = self._kept.get(self.connector.outputs.head_name)
        if kept is not None:
            self._run_head([*options, host, "true"], host)
            self.head_master = kept
            return
        folder = control_folder()
        path = folder / f"fan-{os.getpid()}-{secrets.token_hex(4)}" if folder else None
        if path is None or len(str(path)) > CONTROL_PATH_MAX:
            return  # no private folder for a socket: each worker reaches the head itself
        self._run_head([*options, "-o", "ControlMaster=yes",
                        "-o", f"ControlPath={_escape(str(path))}", "-o", "ControlPersist=60",
                        host, "true"], host)
        self.head_master, self._own_master = path, True

    def stop_head_master(self) -> None:
        if self._own_master and self.head_master is not None:
            subprocess.run([self.ssh, "-F", "/dev/null", "-o",
                            f"ControlPath={_escape(str(self.head_master))}", "-O", "exit",
                            "head"], capture_output=True, timeout=30, check=False)

    def _run_head(self, argv: list[str], host: str) -> None:
        run = subprocess.run([self.ssh, *argv], stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=self.connector.timeout * 4)
        if run.returncode != 0:
            said = run.stderr.decode(errors="replace").strip().splitlines()
            raise OpsError(f"the head (every worker's jump host) at {host}: ssh exited "
                           f"{run.returncode}: {said[-1] if said else 'no message'}")


def control_folder() -> Path | None:
    """The user's private folder for OpenSSH's master sockets: `ray-gcp-<uid>` in
    $XDG_RUNTIME_DIR (else the temp folder), made 0700; None when it is not a folder of
    ours that only we can enter (then no master is kept)."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    folder = base / f"ray-gcp-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return folder


def control_prefix(known_hosts: Path) -> str:
    """What the master sockets of one stack's state folder start with."""
    return "cm-" + hashlib.sha256(str(known_hosts.resolve()).encode()).hexdigest()[:12]


@contextlib.contextmanager
def open_ssh(connector: Connector, ssh: str, fan_out: bool = False) -> Iterator[OpenSsh]:
    """An OpenSsh for `connector`'s stack; its key and known_hosts are gone after, and so is
    the master to the head a `fan_out` started for itself."""
    state = connector.known_hosts.parent
    with tempfile.TemporaryDirectory(prefix="openssh-", dir=state) as workdir:
        os.chmod(workdir, 0o700)
        openssh = OpenSsh(connector, ssh, Path(workdir), fan_out)
        openssh.known_hosts.touch(mode=0o600)
        key = os.memfd_create("ray-gcp-ssh-key", os.MFD_CLOEXEC)
        try:
            os.fchmod(key, 0o600)
            os.write(key, (connector.login_key_text().rstrip("\n") + "\n").encode())
            openssh.key_path = f"/proc/{os.getpid()}/fd/{key}"
            if fan_out:
                openssh.start_head_master()
            yield openssh
        finally:
            openssh.stop_head_master()
            os.close(key)


def _escape(command: str) -> str:
    """A ProxyCommand as ssh reads it: `%` would start one of its tokens."""
    return command.replace("%", "%%")
