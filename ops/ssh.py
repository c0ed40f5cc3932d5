"""SSH to a stack's nodes: pinned host keys, the key held in memory, one client per host.

Host keys are checked against a per-stack known_hosts file (OpenSSH format, so `ssh -o
UserKnownHostsFile=` can share it). The first contact with a host pins its key and prints the
fingerprint; a different key later is refused. Workers are reached through the head as a jump
host (a `direct-tcpip` channel as the socket), the way Ray's nodes sit on an internal network.
"""

from __future__ import annotations

import io
import sys
import threading
from pathlib import Path
from typing import TextIO

import paramiko

from ops.errors import OpsError
from ops.paths import known_hosts_path
from ops.stack_outputs import Node, StackOutputs

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


class PinOnFirstUse(paramiko.MissingHostKeyPolicy):
    """Unknown host: append its key to the stack's known_hosts and say so (trust on first use).

    Known hosts never reach this policy: paramiko compares them itself and raises
    BadHostKeyException on a mismatch, which Connector turns into a refusal.
    """

    _lock = threading.Lock()

    def __init__(self, path: Path, announce: TextIO) -> None:
        self.path = path
        self.announce = announce

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey):
        with self._lock:
            client.get_host_keys().add(hostname, key.get_name(), key)
            with self.path.open("a") as known_hosts:
                known_hosts.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        print(
            f"pinned host key of {hostname}: {key.get_name()} {key.fingerprint} "
            f"(in {self.path})",
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
    ) -> None:
        self.outputs = outputs
        self.known_hosts = known_hosts or known_hosts_path(outputs.stack)
        self.known_hosts.touch(mode=0o600, exist_ok=True)
        self.announce = announce
        self.timeout = timeout
        self._key = load_private_key(outputs.ssh_private_key)
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
                self._clients[self.outputs.head_name] = self._connect(
                    self.outputs.head_address, "the head", sock=None
                )
            return self._clients[self.outputs.head_name]

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
                    node.internal_ip, f"worker {node.name}", sock=channel
                )
            return self._clients[node.name]

    def _connect(self, host: str, what: str, sock: paramiko.Channel | None) -> paramiko.SSHClient:
        port = self.outputs.ssh_port
        user = self.outputs.ssh_user
        client = paramiko.SSHClient()
        client.load_host_keys(str(self.known_hosts))
        client.set_missing_host_key_policy(PinOnFirstUse(self.known_hosts, self.announce))
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


def _refused(exc: Exception) -> bool:
    if isinstance(exc, ConnectionRefusedError):
        return True
    errors = getattr(exc, "errors", {}) or {}
    return any(isinstance(err, ConnectionRefusedError) for err in errors.values())


def connect_stack(stack: str | None) -> Connector:
    """The Connector for `--stack` (or the default stack); connections open on first use."""
    from ops.stack_outputs import load_outputs

    return Connector(load_outputs(stack))
