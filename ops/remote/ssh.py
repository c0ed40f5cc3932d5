"""SSH to a stack's nodes: pinned host keys, the key held in memory, one client per host.

Host keys are checked against a per-stack known_hosts file (OpenSSH format, so `ssh -o
UserKnownHostsFile=` can share it). On first contact the offered key is checked against the
keys GCE publishes for the instance (ops.remote.host_keys) when there are any, and refused if it is
none of them; then it is pinned and its fingerprint printed. A different key later is refused,
and so is a known_hosts file with a line that cannot be read (fail closed: skipping it could
let another key be pinned). The file is opened without following symlinks. The head is dialled
directly or through the stack's ProxyCommand (IAP for a private cluster: ops.remote.ssh_proxy);
workers are reached through the head as a jump host (a `direct-tcpip` channel as the socket),
the way Ray's nodes sit on an internal network.

The paramiko side of a connection is ops.remote.ssh_direct, imported on the first direct
connection. A `warm` Connector (exec, submit, status, rsync) first asks the node's warm
connection (ops.remote.warm: a background process holding an authenticated transport), and
after a direct connection starts one for the next task; without a live one it connects
directly, as before.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ops.errors import OpsError
from ops.paths import known_hosts_path, open_no_follow
from ops.remote.host_keys import PublishedKeys, published_host_keys
from ops.remote.known_hosts import host_key_name
from ops.remote.os_login import LoginKey, login_key, os_login_user
from ops.remote.warm import RelayClient, live_daemon, socket_path, start_daemon
from ops.stacks.background import idle_seconds
from ops.stacks.stack import Node, StackOutputs, load_outputs, stack_credentials

if TYPE_CHECKING:  # imported with ops.remote.ssh_direct on the first direct connection
    import paramiko

KeyLookup = Callable[[str, str, str, str, "str | None"], PublishedKeys]
"""(project, zone, instance, api, credentials) -> the keys GCE publishes for the node."""

CONNECT_TIMEOUT = 15.0
DAEMON_DELAY = 1.0
"""Seconds after a direct connection before its warm daemon starts, unless the task ends
first: a short command's output is not slowed by the daemon's own start and handshake
(on the node too), a long one gets its daemon while it runs."""


class Connector:
    """Open, cache and close the SSH clients of one stack; safe to share between threads."""

    def __init__(
        self,
        outputs: StackOutputs,
        known_hosts: Path | None = None,
        announce: TextIO = sys.stderr,
        timeout: float = CONNECT_TIMEOUT,
        key_lookup: KeyLookup = published_host_keys,
        trust_first_use: bool = False,
        warm: bool = False,
    ) -> None:
        """`warm`: use the node's warm connection when one is alive, and start one after a
        direct connection; for channels and SFTP only (no port forwards, no shells)."""
        self.outputs = outputs
        self.trust_first_use = trust_first_use
        self.known_hosts = known_hosts or known_hosts_path(outputs.stack)
        with open_no_follow(self.known_hosts, os.O_WRONLY | os.O_CREAT | os.O_APPEND):
            pass
        self.announce = announce
        self.timeout = timeout
        self.key_lookup = key_lookup
        self.warm = warm and idle_seconds() > 0
        self._key: paramiko.PKey | None = None
        self._login_key: LoginKey | None = None
        self._lock = threading.RLock()
        if not self.warm:  # checked at once; a warm connector parses it when it must
            self._private_key()
        self._login: str | None = None
        self._clients: dict[str, paramiko.SSHClient] = {}
        self._node_locks: dict[str, threading.Lock] = {}
        self.warm_workers = True
        """Start a warm connection for each worker reached directly; a fan-out to every
        node turns it off (a background process per node is no cache at a hundred nodes):
        the head's and the workers' live ones are still used."""
        self._relays: dict[str, RelayClient] = {}
        self._daemons: dict[str, str] = {}  # node -> address, warm daemons still to start
        self._daemon_timer: threading.Timer | None = None

    def __enter__(self) -> Connector:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._start_daemons()
        with self._lock:
            # Workers first: their sockets are channels of the head's transport.
            for name in sorted(self._clients, key=lambda n: n == self.outputs.head_name):
                self._clients.pop(name).close()

    def _private_key(self) -> paramiko.PKey:
        if self._key is None:
            from ops.remote.ssh_direct import load_private_key

            self._key = load_private_key(self.login_key_text())
        return self._key

    def login_key_text(self) -> str:
        """The private key the tasks log in with: the stack's, or with OS Login your own
        (ops.remote.os_login: the stack's key sits on the head, so never in your profile)."""
        return self.os_login_key().private if self.outputs.os_login else \
            self.outputs.ssh_private_key

    def os_login_key(self) -> LoginKey:
        """Your OS Login key for this stack, made on first use (ops.remote.os_login)."""
        with self._lock:
            if self._login_key is None:
                self._login_key = login_key(self.outputs.stack)
            return self._login_key

    def head(self) -> paramiko.SSHClient | RelayClient:
        """The head's client: its warm connection when this connector uses one and it is
        alive, else a direct one."""
        return self._warm(self.outputs.head_name, self._head_host()) or self._direct_head()

    def _head_host(self) -> str:
        from ops.remote.ssh_proxy import head_host, proxy_command

        return head_host(self.outputs, proxy_command(self.outputs))

    def _direct_head(self) -> paramiko.SSHClient:
        with self._lock:
            name = self.outputs.head_name
            if name not in self._clients:
                from ops.remote.ssh_direct import head_socket

                host, sock = head_socket(self.outputs)
                self._clients[name] = self._connect(host, "the head", name, sock=sock)
                self._start_daemon(name, host)
            return self._clients[name]

    def login_user(self) -> str:
        """auth.ssh_user; with OS Login, the POSIX user OS Login gives your key, which is put
        in (or kept in) your profile first (asked once per Connector, before the first
        connection)."""
        with self._lock:
            if self._login is None and not self.outputs.os_login:
                self._login = self.outputs.ssh_user  # no key to parse (nor paramiko to load)
            if self._login is None:
                self._login = os_login_user(self.outputs, self.os_login_key(), self.announce)
            return self._login

    def node(self, node: Node) -> paramiko.SSHClient | RelayClient:
        """The head directly; a worker through a channel the head opens to its internal IP."""
        if node.kind == "head" or node.name == self.outputs.head_name:
            return self.head()
        relay = self._warm(node.name, node.internal_ip)
        if relay is not None:
            return relay
        head = self._direct_head()
        # One lock per worker: handshakes with several workers (a fan-out) run at once.
        with self._lock:
            node_lock = self._node_locks.setdefault(node.name, threading.Lock())
        with node_lock:
            if node.name not in self._clients:
                from ops.remote.ssh_direct import open_worker_socket

                address = (node.internal_ip, self.outputs.ssh_port)
                channel = open_worker_socket(head, address, node.name, self.timeout)
                client = self._connect(node.internal_ip, f"worker {node.name}", node.name,
                                       sock=channel)
                with self._lock:
                    self._clients[node.name] = client
                if self.warm_workers:
                    self._start_daemon(node.name, node.internal_ip)
            return self._clients[node.name]

    def warm_socket(self, name: str, host: str) -> Path | None:
        """Where the warm connection to node `name` at `host` listens (None: nothing pinned
        for it yet, so the first connection is direct)."""
        host_name = host_key_name(host, self.outputs.ssh_port)
        return socket_path(self.known_hosts, name, self.outputs.ssh_user, host_name)

    def _warm(self, name: str, host: str) -> RelayClient | None:
        """The node's live warm connection, when this connector uses them."""
        if not self.warm or name in self._clients:
            return None
        if name not in self._relays:  # asked outside the lock: a fan-out asks many at once
            relay = live_daemon(self.warm_socket(name, host))
            if relay is None:
                return None
            with self._lock:
                self._relays.setdefault(name, relay)
        return self._relays[name]

    def _start_daemon(self, name: str, host: str) -> None:
        """Start node `name`'s warm daemon DAEMON_DELAY from now, or when the task ends."""
        if not self.warm:
            return
        with self._lock:
            self._daemons[name] = host
            if self._daemon_timer is None:
                self._daemon_timer = threading.Timer(DAEMON_DELAY, self._start_daemons)
                self._daemon_timer.daemon = True
                self._daemon_timer.start()

    def _start_daemons(self) -> None:
        with self._lock:
            if self._daemon_timer is not None:
                self._daemon_timer.cancel()
                self._daemon_timer = None
            waiting, self._daemons = self._daemons, {}
        for name, host in waiting.items():
            path = self.warm_socket(name, host)
            if path is not None and live_daemon(path) is None:
                start_daemon(path, {
                    "outputs": asdict(self.outputs), "node": name,
                    "known_hosts": str(self.known_hosts), "idle_seconds": idle_seconds()})

    def _connect(self, host: str, what: str, instance: str, sock: Any) -> paramiko.SSHClient:
        from ops.remote.ssh_direct import PinOnFirstUse, open_client

        policy = PinOnFirstUse(self.known_hosts, self.announce, instance,
                               lambda: self._published_keys(instance), self.trust_first_use)
        return open_client(host, self.outputs.ssh_port, self.login_user(), self._private_key(),
                           self.known_hosts, what, policy, self.timeout, sock)

    def _published_keys(self, instance: str) -> PublishedKeys:
        """The keys GCE publishes for `instance`, looked up in the node's own zone (a worker
        may have failed over to another), with its API (a TPU node's), as the stack's
        identity (ops.stacks.stack.stack_credentials)."""
        outputs = self.outputs
        node = next((n for n in outputs.nodes if n.name == instance), None)
        zone = (node.zone if node else "") or outputs.zone
        api = "tpu" if instance.endswith("-tpu") else "compute"
        try:
            credentials = stack_credentials(outputs)
        except OpsError as exc:
            return PublishedKeys(frozenset(), f"the stack's credentials cannot be read: {exc}")
        return self.key_lookup(outputs.project, zone, instance, api, credentials)


def connect_stack(stack: str | None, trust_first_use: bool = False,
                  warm: bool = False) -> Connector:
    """The Connector for `--stack` (or the default stack); connections open on first use.
    `trust_first_use` pins a host key GCE publishes nothing for (`--trust-first-use`);
    `warm` goes through the nodes' warm connections (channels and SFTP only)."""
    return Connector(load_outputs(stack), trust_first_use=trust_first_use, warm=warm)
