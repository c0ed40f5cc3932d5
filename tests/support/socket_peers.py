"""Who listens on a unix socket: the pid at its other end (SO_PEERCRED), reached through its
folder's descriptor, since a unix socket path holds at most 108 bytes."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path


def short(path: Path) -> str:
    """`path` through its folder's descriptor: a unix socket path holds 108 bytes."""
    return f"/proc/{os.getpid()}/fd/{os.open(path.parent, os.O_RDONLY)}/{path.name}"


def daemon_pid(path: Path) -> int:
    with socket.socket(socket.AF_UNIX) as probe:
        probe.connect(short(path))
        credentials = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                       struct.calcsize("3i"))
    return struct.unpack("3i", credentials)[0]
