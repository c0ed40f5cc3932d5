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
"""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

from ops.errors import OpsError
from ops.paths import known_hosts_path, open_no_follow
from ops.remote.host_keys import PublishedKeys, published_host_keys
from ops.remote.os_login import os_login_user
from ops.remote.ssh_proxy import proxy_command, require_proxy_tool
from ops.stack import Node, StackOutputs, load_outputs, stack_credentials

# (project, zone, instance) -> the host keys GCE publishes for it
KeyLookup = Callable[[str, str, str, str, "str | None"], PublishedKeys]
"""(project, zone, instance, api, credentials) -> the keys GCE publishes for the node."""
TRUST_FIRST_USE_FLAG = "--trust-first-use"

CONNECT_TIMEOUT = 15.0


def load_private_key(text: str) -> paramiko.PKey:
    """Parse the stack's key from memory: it never touches the disk on this path."""
    for key_class in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return key_class.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError):
            continue
    # Do not echo the text: it is the private key.
    raise OpsError("stack output ssh_private_key is not an OpenSSH/PEM private key")


def host_key_name(host: str, port: int) -> str:
    """The known_hosts spelling OpenSSH and paramiko both use."""
    return host if port == 22 else f"[{host}]:{port}"


def read_pins(path: Path) -> list[HostKeyEntry]:
    """Every entry of the stack's known_hosts. A line that cannot be read stops everything:
    paramiko would skip it (and pin another key) or raise with a traceback."""
    with open_no_follow(path, os.O_RDONLY) as handle:
        text = handle.read().decode("utf-8", errors="replace")
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            entry = HostKeyEntry.from_line(line, number)
            reason = "not `host key-type base64`, or an unknown key type"
        except (InvalidHostKey, paramiko.SSHException, ValueError) as exc:
            entry, reason = None, f"a broken key: {str(exc).splitlines()[0][:80]}"
        if entry is None or entry.key is None:
            raise OpsError(f"{path} line {number} cannot be read ({reason}): fix or delete "
                           "that line; no host is trusted until then")
        entries.append(entry)
    return entries


class UnpublishedHostKey(paramiko.SSHException):
    """The offered key is none of those GCE publishes for the instance, or (not asked to
    trust it on first use) there is nothing to check it against."""


class PinOnFirstUse(paramiko.MissingHostKeyPolicy):
    """Unknown host: check its key against the keys GCE publishes for `instance`, append it
    to the stack's known_hosts and say so. When none can be had, the key is refused with the
    reason, unless `trust_first_use` (the user's `--trust-first-use`) accepts it once.

    Known hosts never reach this policy: paramiko compares them itself and raises
    BadHostKeyException on a mismatch, which Connector turns into a refusal.
    """

    _lock = threading.Lock()

    def __init__(self, path: Path, announce: TextIO, instance: str,
                 published: Callable[[], PublishedKeys], trust_first_use: bool = False) -> None:
        self.path = path
        self.announce = announce
        self.instance = instance
        self.published = published
        self.trust_first_use = trust_first_use

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey):
        published = self.published()
        if not published.keys and not self.trust_first_use:
            raise UnpublishedHostKey(
                f"offered {key.get_name()} {key.fingerprint}, which cannot be checked: GCE "
                f"publishes no key for {self.instance} ({published.reason})"
            )
        if published.keys and key.get_base64() not in published.keys:
            raise UnpublishedHostKey(
                f"offered {key.get_name()} {key.fingerprint}, which is none of the host keys "
                f"GCE publishes for instance {self.instance} (guest attributes hostkeys/)"
            )
        with self._lock:
            client.get_host_keys().add(hostname, key.get_name(), key)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
            with open_no_follow(self.path, flags) as known_hosts:
                known_hosts.write(f"{hostname} {key.get_name()} {key.get_base64()}\n".encode())
        how = (f"it matches the key GCE publishes for {self.instance}" if published.keys
               else f"trusted on first use ({TRUST_FIRST_USE_FLAG}): GCE publishes no key "
                    f"for {self.instance}, {published.reason}")
        print(
            f"pinned host key of {hostname}: {key.get_name()} {key.fingerprint} "
            f"(in {self.path}; {how})",
            file=self.announce,
            flush=True,
        )


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
    ) -> None:
        self.outputs = outputs
        self.trust_first_use = trust_first_use
        self.known_hosts = known_hosts or known_hosts_path(outputs.stack)
        with open_no_follow(self.known_hosts, os.O_WRONLY | os.O_CREAT | os.O_APPEND):
            pass
        self.announce = announce
        self.timeout = timeout
        self.key_lookup = key_lookup
        self._key = load_private_key(outputs.ssh_private_key)
        self._login: str | None = None
        self._clients: dict[str, paramiko.SSHClient] = {}
        self._lock = threading.RLock()

    def __enter__(self) -> Connector:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            # Workers first: their sockets are channels of the head's transport.
            for name in sorted(self._clients, key=lambda n: n == self.outputs.head_name):
                self._clients.pop(name).close()

    def head(self) -> paramiko.SSHClient:
        with self._lock:
            if self.outputs.head_name not in self._clients:
                host, sock = head_socket(self.outputs)
                self._clients[self.outputs.head_name] = self._connect(
                    host, "the head", self.outputs.head_name, sock=sock
                )
            return self._clients[self.outputs.head_name]

    def login_user(self) -> str:
        """auth.ssh_user; with OS Login, the POSIX user OS Login gives the stack's key (asked
        once per Connector, before the first connection)."""
        with self._lock:
            if self._login is None:
                self._login = (
                    os_login_user(self.outputs, f"{self._key.get_name()} {self._key.get_base64()}")
                    if self.outputs.os_login else self.outputs.ssh_user
                )
            return self._login

    def node(self, node: Node) -> paramiko.SSHClient:
        """The head directly; a worker through a channel the head opens to its internal IP."""
        if node.kind == "head" or node.name == self.outputs.head_name:
            return self.head()
        head = self.head()
        with self._lock:
            if node.name not in self._clients:
                address = (node.internal_ip, self.outputs.ssh_port)
                try:
                    channel = head.get_transport().open_channel(
                        "direct-tcpip", address, ("127.0.0.1", 0), timeout=self.timeout
                    )
                except (paramiko.ChannelException, paramiko.SSHException, OSError) as exc:
                    raise OpsError(
                        f"the head could not reach worker {node.name} at "
                        f"{node.internal_ip}:{self.outputs.ssh_port}: {exc}"
                    ) from None
                self._clients[node.name] = self._connect(
                    node.internal_ip, f"worker {node.name}", node.name, sock=channel
                )
            return self._clients[node.name]

    def _connect(
        self, host: str, what: str, instance: str,
        sock: paramiko.Channel | paramiko.ProxyCommand | None,
    ) -> paramiko.SSHClient:
        port = self.outputs.ssh_port
        user = self.login_user()
        client = paramiko.SSHClient()
        for entry in read_pins(self.known_hosts):
            for name in entry.hostnames:
                client.get_host_keys().add(name, entry.key.get_name(), entry.key)
        client.set_missing_host_key_policy(PinOnFirstUse(
            self.known_hosts, self.announce, instance,
            lambda: self._published_keys(instance), self.trust_first_use))
        try:
            client.connect(
                host,
                port=port,
                username=user,
                pkey=self._key,
                sock=sock,
                timeout=self.timeout,
                banner_timeout=self.timeout,
                auth_timeout=self.timeout,
                allow_agent=False,
                look_for_keys=False,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise OpsError(
                f"host key of {what} at {host}:{port} does not match the one pinned in "
                f"{self.known_hosts} (offered {exc.key.fingerprint}, pinned "
                f"{exc.expected_key.fingerprint}): refusing to connect. If the node was "
                f"recreated, delete its line {host_key_name(host, port)} from that file"
            ) from None
        except UnpublishedHostKey as exc:
            client.close()
            accept = ("" if self.trust_first_use else
                      f"; to accept the key offered now once (it is pinned then), run again "
                      f"with {TRUST_FIRST_USE_FLAG}")
            raise OpsError(
                f"host key of {what} at {host}:{port} {exc}: refusing to connect (nothing "
                f"was pinned){accept}"
            ) from None
        except paramiko.AuthenticationException:
            client.close()
            raise OpsError(
                f"ssh auth refused by {what} for {user}@{host}:{port}: the stack's key is not "
                "authorized there (still booting, or ssh_user changed?)"
            ) from None
        except TimeoutError:
            client.close()
            raise OpsError(
                f"cannot reach {what} at {host}:{port}: timed out after {self.timeout:.0f}s "
                f"(is it running, and is port {port} open to you?)"
            ) from None
        except (paramiko.ssh_exception.NoValidConnectionsError, ConnectionError) as exc:
            client.close()
            reason = "connection refused" if _refused(exc) else str(exc)
            raise OpsError(
                f"cannot reach {what} at {host}:{port}: {reason} (is it running, and is "
                f"sshd listening on {port}?)"
            ) from None
        except paramiko.SSHException as exc:
            client.close()
            raise OpsError(f"ssh to {what} at {host}:{port} failed: {exc}") from None
        except OSError as exc:
            client.close()
            raise OpsError(f"cannot reach {what} at {host}:{port}: {exc.strerror or exc}") from None
        return client

    def _published_keys(self, instance: str) -> PublishedKeys:
        """The keys GCE publishes for `instance`, looked up in the node's own zone (a worker
        may have failed over to another), with its API (a TPU node's), as the stack's
        identity (ops.stack.stack_credentials)."""
        outputs = self.outputs
        node = next((n for n in outputs.nodes if n.name == instance), None)
        zone = (node.zone if node else "") or outputs.zone
        api = "tpu" if instance.endswith("-tpu") else "compute"
        try:
            credentials = stack_credentials(outputs)
        except OpsError as exc:
            return PublishedKeys(frozenset(), f"the stack's credentials cannot be read: {exc}")
        return self.key_lookup(outputs.project, zone, instance, api, credentials)


def head_socket(outputs: StackOutputs) -> tuple[str, paramiko.ProxyCommand | None]:
    """How the head is dialled: its address directly, or through the stack's ProxyCommand
    (IAP in private mode), its key then pinned under its instance name (no address to pin)."""
    command = proxy_command(outputs)
    if command is None:
        return outputs.head_address, None
    require_proxy_tool(command)
    return outputs.head_name, paramiko.ProxyCommand(command)


def _refused(exc: Exception) -> bool:
    if isinstance(exc, ConnectionRefusedError):
        return True
    errors = getattr(exc, "errors", {}) or {}
    return any(isinstance(err, ConnectionRefusedError) for err in errors.values())


def connect_stack(stack: str | None, trust_first_use: bool = False) -> Connector:
    """The Connector for `--stack` (or the default stack); connections open on first use.
    `trust_first_use` pins a host key GCE publishes nothing for (`--trust-first-use`)."""
    return Connector(load_outputs(stack), trust_first_use=trust_first_use)
