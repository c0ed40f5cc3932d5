"""Which local process holds the other end of a TCP connection to the fake (Linux /proc).

A test asks who created a node: the engine's plugin process, or the test itself.
"""

from __future__ import annotations

import os
from pathlib import Path


def _socket_inode(port: int, remote_port: int) -> str | None:
    """The inode of the socket whose local port is `port` and remote port `remote_port`, from
    /proc/net/tcp{,6}. A port number alone can name two sockets: a client's ephemeral port may
    equal a port another server listens on at another loopback address (the sshd fleets listen
    on 127.0.0.x), so a connection is matched by both ends."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote = (int(field.rsplit(":", 1)[1], 16) for field in fields[1:3])
            if (local, remote) == (port, remote_port) and fields[9] != "0":
                return fields[9]
    return None


def peer_process(port: int, server_port: int) -> tuple[int | None, str]:
    """(pid, command line) of the process at the other end of a connection from local port
    `port` (to `server_port`), or (None, "") if unknown."""
    pid = peer_pid(port, server_port)
    if pid is None:
        return None, ""
    try:
        return pid, Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").strip()
    except OSError:
        return pid, ""


def peer_pid(port: int, server_port: int) -> int | None:
    """The pid of the process owning the local socket bound to `port` (connected to
    `server_port`), or None if unknown."""
    inode = _socket_inode(port, server_port)
    if inode is None:
        return None
    wanted = f"socket:[{inode}]"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                if os.readlink(fd.path) == wanted:
                    return int(entry.name)
        except OSError:
            continue
    return None
