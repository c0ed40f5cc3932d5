"""A warm SSH connection per node: a small background process holds one authenticated
paramiko transport and runs channels on it for the tasks (OpenSSH's ControlMaster, for us).

The protocol (ops.remote.warm is the task's side). The process listens on a unix socket in
the stack's 0700 state folder, mode 0600 from its creation. A connection from another user
is closed unanswered (SO_PEERCRED). Each connection is one request, a JSON line:
- `{"ping": true}`: answered `ok` while the transport is alive (else the process exits);
- `{"stop": true}`: answered `bye`, then the transport is closed and the process exits;
- `{"exec": "command"}`: a session channel runs the command; the process answers a frame
  `k` once the channel is open (or `f` + why), then relays: bytes the task sends are the
  command's stdin (the task's EOF is the channel's), and frames come back, `o` stdout,
  `e` stderr, `x` the exit status (4 bytes, big-endian) last;
- `{"subsystem": "sftp"}`: frame `k`, then the socket is the subsystem's byte stream both
  ways (paramiko's SFTPClient runs over it in the task).
A frame is one kind byte, a 4-byte big-endian length and the payload.

The transport is opened by ops.remote.ssh's Connector exactly as a task opens one (pinned
host keys, the same refusals, nothing pinned here: the task that started it pinned the key
the socket is named for), before the socket exists: it serves nothing it did not verify. It
exits when idle for `idle_seconds` with no request running, when the transport dies, or
when another daemon already serves the same socket (a lock file beside it). The stack
outputs, the private key among them, reach it on stdin; ops.stacks.background starts it with a
minimal environment and makes it undumpable (no core file, PR_SET_DUMPABLE 0) before it reads
them.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

from ops.remote.eof import send_eof
from ops.remote.warm import CHUNK, FRAME
from ops.stacks.background import accept_own, main_with_settings, only_one, serving

MAX_REQUEST = 65536


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return FRAME.pack(kind, len(payload)) + payload


class Daemon:
    """Serves requests on `listener` over `transport` until idle, stopped, or the transport
    dies."""

    def __init__(self, transport: Any, listener: socket.socket, idle_seconds: float,
                 owner_uid: int | None = None) -> None:
        self.transport = transport
        self.listener = listener
        self.idle_seconds = idle_seconds
        self.owner_uid = os.getuid() if owner_uid is None else owner_uid
        self.running = 0
        self.last_active = time.monotonic()
        self.stopping = False
        self.lock = threading.Lock()

    def serve(self) -> None:
        self.listener.settimeout(1.0)
        while self.transport.is_active() and not self.stopping:
            with self.lock:
                if self.running == 0 and \
                        time.monotonic() - self.last_active > self.idle_seconds:
                    return
            connection = accept_own(self.listener, self.owner_uid)
            if connection is None:
                continue
            with self.lock:
                self.running += 1
            threading.Thread(target=self._handle, args=(connection,), daemon=True).start()

    def _handle(self, connection: socket.socket) -> None:
        try:
            with connection:
                self._request(connection)
        except (OSError, EOFError, ValueError):
            pass  # the task went away mid-request; its channel was closed
        finally:
            with self.lock:
                self.running -= 1
                self.last_active = time.monotonic()

    def _request(self, connection: socket.socket) -> None:
        request = json.loads(connection.makefile("rb").readline(MAX_REQUEST))
        if "ping" in request:
            connection.sendall(b"ok\n" if self.transport.is_active() else b"gone\n")
            return
        if "stop" in request:
            self.stopping = True
            connection.sendall(b"bye\n")
            return
        try:
            channel = self.transport.open_session(timeout=15)
            if "exec" in request:
                channel.exec_command(str(request["exec"]))
            else:
                channel.invoke_subsystem(str(request["subsystem"]))
        except Exception as exc:  # noqa: BLE001 - any failure goes to the task, which says it
            connection.sendall(frame(b"f", str(exc).encode()))
            return
        try:
            connection.sendall(frame(b"k"))
            if "exec" in request:
                _relay_exec(connection, channel)
            else:
                _relay_stream(connection, channel)
        finally:
            channel.close()


def _relay_exec(connection: socket.socket, channel: Any) -> None:
    """Command output as frames; the task's bytes as stdin."""
    stdin = threading.Thread(target=_pump_stdin, args=(connection, channel), daemon=True)
    stdin.start()
    stderr = threading.Thread(target=_pump_frames,
                              args=(channel.recv_stderr, connection, b"e"), daemon=True)
    stderr.start()
    _pump_frames(channel.recv, connection, b"o")
    stderr.join()
    connection.sendall(frame(b"x", struct.pack(">i", channel.recv_exit_status())))


def _pump_frames(receive: Any, connection: socket.socket, kind: bytes) -> None:
    while data := receive(CHUNK):
        connection.sendall(frame(kind, data))


def _pump_stdin(connection: socket.socket, channel: Any) -> None:
    with contextlib.suppress(OSError):
        while data := connection.recv(CHUNK):
            channel.sendall(data)
    with contextlib.suppress(OSError, EOFError):
        send_eof(channel)


def _relay_stream(connection: socket.socket, channel: Any) -> None:
    """Raw bytes both ways until either side ends."""
    selector = selectors.DefaultSelector()
    selector.register(connection, selectors.EVENT_READ, "task")
    selector.register(channel, selectors.EVENT_READ, "channel")
    while True:
        for key, _ in selector.select():
            if key.data == "task":
                data = connection.recv(CHUNK)
                if not data:
                    return
                channel.sendall(data)
            else:
                data = channel.recv(CHUNK)
                if not data:
                    return
                connection.sendall(data)


def _outputs(settings: dict[str, Any]) -> Any:
    from ops.stacks.stack import Node, StackOutputs

    fields = dict(settings["outputs"])
    fields["nodes"] = tuple(Node(**node) for node in fields.get("nodes", ()))
    return StackOutputs(**fields)


def serve_node(settings: dict[str, Any]) -> None:
    """Connect to the node as a task would, then serve the socket until idle. Any failure
    ends the process quietly: the task that started it has its own connection."""
    from ops.remote.ssh import Connector

    socket_path = Path(settings["socket"])
    os.chdir(socket_path.parent)  # bind by name: a full path can pass the 108-byte limit
    if not only_one(f"{socket_path.name}.lock"):
        return  # another daemon serves this node
    outputs = _outputs(settings)
    with open(os.devnull, "w") as quiet, \
            Connector(outputs, Path(settings["known_hosts"]), announce=quiet) as connector:
        name = settings["node"]
        client = connector.head() if name == outputs.head_name \
            else connector.node(outputs.node(name))
        transport = client.get_transport()
        transport.set_keepalive(30)
        with serving(socket_path.name) as listener:
            Daemon(transport, listener, float(settings["idle_seconds"])).serve()


if __name__ == "__main__":
    main_with_settings(serve_node)
