"""A direct SSH connection with paramiko: the key parsed from memory, the host key checked
against the stack's pins (or, on first contact, against the keys GCE publishes), and every
failure said in one line. Imported only when a task opens a connection itself (not when a
warm connection, ops.remote.warm, serves it): paramiko and cryptography are most of a warm
`invoke exec`'s start otherwise."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

from ops.errors import OpsError
from ops.paths import open_no_follow
from ops.remote.host_keys import PublishedKeys
from ops.remote.known_hosts import host_key_name
from ops.remote.ssh_proxy import head_host, proxy_command, require_proxy_tool
from ops.stacks.stack import StackOutputs

TRUST_FIRST_USE_FLAG = "--trust-first-use"


def load_private_key(text: str) -> paramiko.PKey:
    """Parse the stack's key from memory: it never touches the disk on this path."""
    for key_class in (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey):
        try:
            return key_class.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError):
            continue
    # Do not echo the text: it is the private key.
    raise OpsError("stack output ssh_private_key is not an OpenSSH/PEM private key")


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
    BadHostKeyException on a mismatch, which `open_client` turns into a refusal.
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


def open_client(
    host: str, port: int, user: str, key: paramiko.PKey, known_hosts: Path, what: str,
    policy: PinOnFirstUse, timeout: float,
    sock: paramiko.Channel | paramiko.ProxyCommand | None,
) -> paramiko.SSHClient:
    """An authenticated client of `host`, its key one of the pins (or accepted by `policy`
    on first contact); every failure an OpsError naming `what` and why."""
    client = paramiko.SSHClient()
    for entry in read_pins(known_hosts):
        for name in entry.hostnames:
            client.get_host_keys().add(name, entry.key.get_name(), entry.key)
    client.set_missing_host_key_policy(policy)
    trust_first_use = policy.trust_first_use
    try:
        client.connect(
            host,
            port=port,
            username=user,
            pkey=key,
            sock=sock,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            allow_agent=False,
            look_for_keys=False,
        )
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise OpsError(
            f"host key of {what} at {host}:{port} does not match the one pinned in "
            f"{known_hosts} (offered {exc.key.fingerprint}, pinned "
            f"{exc.expected_key.fingerprint}): refusing to connect. If the node was "
            f"recreated, delete its line {host_key_name(host, port)} from that file"
        ) from None
    except UnpublishedHostKey as exc:
        client.close()
        accept = ("" if trust_first_use else
                  f"; to accept the key offered now once (it is pinned then), run again "
                  f"with {TRUST_FIRST_USE_FLAG}")
        raise OpsError(
            f"host key of {what} at {host}:{port} {exc}: refusing to connect (nothing "
            f"was pinned){accept}"
        ) from None
    except paramiko.AuthenticationException:
        client.close()
        raise OpsError(
            f"ssh auth refused by {what} for {user}@{host}:{port}: the key is not authorized "
            "there (still booting, or ssh_user changed? With provider.os_login: has your "
            "account roles/compute.osAdminLogin on the project?)"
        ) from None
    except TimeoutError:
        client.close()
        raise OpsError(
            f"cannot reach {what} at {host}:{port}: timed out after {timeout:.0f}s "
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
    except EOFError:  # paramiko's own, when sshd hangs up after its banner
        client.close()
        raise OpsError(
            f"ssh to {what} at {host}:{port} failed: the connection closed during the SSH "
            "handshake (is the node shutting down, or sshd restarting? run again)"
        ) from None
    except OSError as exc:
        client.close()
        raise OpsError(f"cannot reach {what} at {host}:{port}: {exc.strerror or exc}") from None
    return client


def open_worker_socket(head: paramiko.SSHClient, address: tuple[str, int], name: str,
                       timeout: float) -> paramiko.Channel:
    """A channel the head opens to a worker's internal address, the worker's socket."""
    try:
        return head.get_transport().open_channel(
            "direct-tcpip", address, ("127.0.0.1", 0), timeout=timeout
        )
    except (paramiko.ChannelException, paramiko.SSHException, OSError) as exc:
        raise OpsError(
            f"the head could not reach worker {name} at {address[0]}:{address[1]}: {exc}"
        ) from None


def head_socket(outputs: StackOutputs) -> tuple[str, paramiko.ProxyCommand | None]:
    """How the head is dialled: its address directly, or through the stack's ProxyCommand
    (IAP in private mode), its key then pinned under its instance name (no address to pin)."""
    command = proxy_command(outputs)
    host = head_host(outputs, command)
    if command is None:
        return host, None
    require_proxy_tool(command)
    return host, paramiko.ProxyCommand(command)


def _refused(exc: Exception) -> bool:
    if isinstance(exc, ConnectionRefusedError):
        return True
    errors = getattr(exc, "errors", {}) or {}
    return any(isinstance(err, ConnectionRefusedError) for err in errors.values())
