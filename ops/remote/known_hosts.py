"""The stack's known_hosts file read as text, for what needs no cryptography: the spelling
of a host in it, the key pinned for a host (which goes into the file OpenSSH checks the node
against) and the name a node's warm connection and OpenSSH master take from that pin.
Checking keys is ops.remote.ssh_direct's job; nothing here trusts a key."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def host_key_name(host: str, port: int) -> str:
    """The known_hosts spelling OpenSSH and paramiko both use."""
    return host if port == 22 else f"[{host}]:{port}"


def pin_digest(node: str, user: str, host_name: str, key: str) -> str:
    """A name for one node, address, login and pinned key together (hex SHA-256): what a warm
    connection's socket, or OpenSSH's master, is named for, so a key pinned anew gets another."""
    return hashlib.sha256(f"{node}\0{user}\0{host_name}\0{key}".encode()).hexdigest()


def pinned_key(known_hosts: Path, host_name: str) -> str | None:
    """`type base64` of the key pinned for `host_name` (known_hosts spelling); None when
    none is, or the file cannot be read (never through a symlink)."""
    try:
        descriptor = os.open(known_hosts, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        text = handle.read().decode("utf-8", errors="replace")
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and not fields[0].startswith("#") \
                and host_name in fields[0].split(","):
            return f"{fields[1]} {fields[2]}"
    return None
