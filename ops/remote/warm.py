"""The task's side of a warm connection (ops.remote.warm_daemon holds the transport and says
the protocol): find a node's daemon, start one, and channels and SFTP that run through it.

A daemon's socket is named for the node, its address, the SSH user and the host key pinned
for it (ops.remote.known_hosts), so a node whose key is pinned anew gets a new daemon and the
old one is never asked again. Before a key is pinned there is no socket to look for: the
first connection is always direct, and pins it.

`RelayClient` offers the part of `paramiko.SSHClient` that exec, submit, status and the sync
use (`get_transport().open_session()`, `exec_command`, `recv`, `recv_stderr`,
`recv_exit_status`, `open_sftp`), so they do not know which they were given. Nothing here
imports paramiko until SFTP is asked for: a warm `invoke exec` does no SSH handshake and
loads no cryptography.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import threading
from pathlib import Path
from typing import Any

from ops.errors import OpsError
from ops.remote.known_hosts import pin_digest, pinned_key
from ops.stacks.background import connect_socket, request_line, start_detached

FRAME = struct.Struct(">cI")
CHUNK = 1 << 17


def socket_path(known_hosts: Path, node: str, user: str, host_name: str) -> Path | None:
    """The daemon's socket for this node, address, user and pinned key (in the stack's 0700
    state folder, next to the pins); None before a key is pinned."""
    key = pinned_key(known_hosts, host_name)
    if key is None:
        return None
    return known_hosts.parent / f"warm-{pin_digest(node, user, host_name, key)[:20]}.sock"


def ask(path: Path, request: dict[str, Any]) -> bytes | None:
    """A one-line request and its one-line answer; None when no daemon answers."""
    return request_line(path, request, 64)


def live_daemon(path: Path | None) -> RelayClient | None:
    """The node's daemon when one answers that its transport is alive."""
    if path is None:
        return None
    return RelayClient(path) if ask(path, {"ping": True}) == b"ok\n" else None


def stop_daemon(path: Path) -> bool:
    """Ask the daemon at `path` to close its transport and exit; whether one was there."""
    return ask(path, {"stop": True}) == b"bye\n"


def start_daemon(path: Path, settings: dict[str, Any]) -> None:
    """Start the node's daemon in the background, in a session of its own; it connects by
    itself, exactly as a task does, and serves `path` after. Its settings (the private key
    among them) go over its stdin, never argv or disk."""
    start_detached("ops.remote.warm_daemon", {**settings, "socket": str(path)})


class StaleDaemon(OpsError):
    """The daemon went away, or could not open a channel (its transport died meanwhile)."""


class RelayClient:
    """A node's daemon, used like a paramiko SSHClient."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get_transport(self) -> RelayClient:
        return self

    def open_session(self, timeout: float | None = None) -> RelayChannel:
        return RelayChannel(self.path)

    def open_sftp(self) -> Any:
        import paramiko

        channel = RelayChannel(self.path)
        channel.request({"subsystem": "sftp"})
        return paramiko.SFTPClient(SftpStream(channel.sock))

    def close(self) -> None:
        """Nothing to close: the daemon keeps the transport for the next task."""


class RelayChannel:
    """One request to the daemon; for exec, its stdout and stderr come back demultiplexed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock: socket.socket | None = None
        self._streams = {b"o": _Stream(), b"e": _Stream()}
        self._status = -1
        self._done = threading.Event()

    def request(self, request: dict[str, str]) -> None:
        sock = connect_socket(self.path)
        if sock is None:
            raise StaleDaemon(f"the warm connection at {self.path} went away: run again")
        sock.sendall(json.dumps(request).encode() + b"\n")
        try:
            kind, payload = read_frame(sock)
        except (OSError, EOFError):
            kind, payload = b"f", b"it closed"
        if kind != b"k":
            sock.close()
            raise StaleDaemon("the warm connection could not open a channel ("
                              f"{payload.decode(errors='replace')[:200]}): run again")
        self.sock = sock

    def exec_command(self, command: str) -> None:
        self.request({"exec": command})
        threading.Thread(target=self._read_frames, daemon=True).start()

    def _read_frames(self) -> None:
        try:
            while True:
                kind, payload = read_frame(self.sock)
                if kind == b"x":
                    self._status = struct.unpack(">i", payload)[0]
                    break
                if kind in self._streams:
                    self._streams[kind].put(payload)
        except (OSError, EOFError):
            pass  # -1 stays: paramiko's status for "the server sent none"
        finally:
            for stream in self._streams.values():
                stream.put(b"")
            self._done.set()

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, data: bytes) -> int:
        self.sock.sendall(data)
        return len(data)

    def shutdown_write(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def recv(self, size: int) -> bytes:
        return self._streams[b"o"].get(size)

    def recv_stderr(self, size: int) -> bytes:
        return self._streams[b"e"].get(size)

    def recv_exit_status(self) -> int:
        self._done.wait()
        return self._status

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


class _Stream:
    """Bytes from the frame reader to one consumer; b"" marks the end."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._ended = False
        self._ready = threading.Condition()

    def put(self, data: bytes) -> None:
        with self._ready:
            if data:
                self._chunks.append(data)
            else:
                self._ended = True
            self._ready.notify_all()

    def get(self, size: int) -> bytes:
        with self._ready:
            self._ready.wait_for(lambda: self._chunks or self._ended)
            if not self._chunks:
                return b""
            chunk = self._chunks[0]
            if len(chunk) > size:
                self._chunks[0] = chunk[size:]
                return chunk[:size]
            return self._chunks.pop(0)


def read_exactly(sock: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        data = sock.recv(min(left, CHUNK))
        if not data:
            raise EOFError("the warm connection closed")
        parts.append(data)
        left -= len(data)
    return b"".join(parts)


def read_frame(sock: socket.socket) -> tuple[bytes, bytes]:
    kind, size = FRAME.unpack(read_exactly(sock, FRAME.size))
    return kind, read_exactly(sock, size)


class SftpStream:
    """The socket as the channel paramiko's SFTPClient expects (send, recv, close, a
    readiness check for pipelined writes, and a transport to name its logger after)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def send(self, data: bytes) -> int:
        return self.sock.send(data)

    def recv(self, size: int) -> bytes:
        return self.sock.recv(size)

    def recv_ready(self) -> bool:
        return bool(select.select([self.sock], [], [], 0)[0])

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def gettimeout(self) -> float | None:
        return self.sock.gettimeout()

    def setblocking(self, blocking: bool) -> None:
        self.sock.setblocking(blocking)

    def close(self) -> None:
        self.sock.close()

    def get_transport(self) -> SftpStream:
        return self

    def get_log_channel(self) -> str:
        return "paramiko.transport"

    def get_name(self) -> str:
        return f"warm sftp {self.sock.fileno()}"
