"""A hostile node: an SSH and SFTP server on 127.0.0.1, built on paramiko's server classes,
that answers whatever a test scripts (listings with `..` and `/` in names, setuid modes, links
leaving the tree, a link and a folder of one name, tar streams with such members, floods of
stderr). It imports nothing of the product: it only speaks the protocol.
"""

from __future__ import annotations

import io
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import paramiko

_PIECE = 32768
Answer = Callable[[str], tuple[bytes, bytes, int]]
"""command -> (stdout, stderr, exit status); stderr is sent first, whole, then stdout."""


@dataclass
class Entry:
    """One name in a scripted listing."""

    name: str
    mode: int  # with its type bits: stat.S_IFREG | 0o644, stat.S_IFDIR | 0o755, stat.S_IFLNK
    content: bytes = b""
    link: str = ""


@dataclass
class Tree:
    """Scripted folders: path as the client asks for it -> its listing. A file's content is
    found by the path the client joins (`folder/name`), whatever the name holds."""

    folders: dict[str, list[Entry]] = field(default_factory=dict)
    on_serve: Callable[[str], None] | None = None
    """Called with the path each time the client lists a folder or opens a file, before it is
    served: what a race on the client's machine does meanwhile (a folder swapped for a link)."""

    def entry(self, path: str) -> Entry | None:
        """The first entry of that name in its folder's listing, else a scripted folder."""
        folder, _, name = path.rpartition("/")
        listed = next((e for e in self.folders.get(folder, []) if e.name == name), None)
        if listed is None and path in self.folders:
            return Entry(path, stat.S_IFDIR | 0o755)
        return listed


def _attributes(entry: Entry) -> paramiko.SFTPAttributes:
    attr = paramiko.SFTPAttributes()
    attr.filename = entry.name
    attr.st_mode = entry.mode
    attr.st_size = len(entry.content)
    attr.st_mtime = attr.st_atime = 1_700_000_000
    return attr


class _Handle(paramiko.SFTPHandle):
    def __init__(self, content: bytes) -> None:
        super().__init__()
        self.readfile = io.BytesIO(content)


def _sftp_for(tree: Tree) -> type[paramiko.SFTPServerInterface]:
    class HostileSftp(paramiko.SFTPServerInterface):
        def list_folder(self, path: str):  # type: ignore[override]
            if path not in tree.folders:
                return paramiko.SFTP_NO_SUCH_FILE
            if tree.on_serve is not None:
                tree.on_serve(path)
            return [_attributes(entry) for entry in tree.folders[path]]

        def stat(self, path: str):  # type: ignore[override]
            entry = tree.entry(path)
            return _attributes(entry) if entry else paramiko.SFTP_NO_SUCH_FILE

        lstat = stat

        def open(self, path: str, flags: int, attr: paramiko.SFTPAttributes):  # type: ignore[override]
            entry = tree.entry(path)
            if entry is None or stat.S_ISDIR(entry.mode):
                return paramiko.SFTP_NO_SUCH_FILE
            if tree.on_serve is not None:
                tree.on_serve(path)
            return _Handle(entry.content)

        def readlink(self, path: str):  # type: ignore[override]
            entry = tree.entry(path)
            return entry.link if entry and entry.link else paramiko.SFTP_NO_SUCH_FILE

        def canonicalize(self, path: str) -> str:
            return path

    return HostileSftp


class _Server(paramiko.ServerInterface):
    def __init__(self, answer: Answer | None) -> None:
        self.answer = answer
        self.threads: list[threading.Thread] = []

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        if self.answer is None:
            return False
        out, err, status = self.answer(command.decode())

        def reply() -> None:
            # A real sshd answers the exec request before the command's output; here the
            # answer is sent when this method returns, so the output waits for what every
            # client does once it has the answer: closing its side (no stdin).
            deadline = time.monotonic() + 10
            while not channel.eof_received and time.monotonic() < deadline:
                time.sleep(0.005)
            try:
                # In small pieces: paramiko's sendall copies what is left after each send.
                for start in range(0, len(err), _PIECE):
                    channel.sendall_stderr(err[start:start + _PIECE])
                for start in range(0, len(out), _PIECE):
                    channel.sendall(out[start:start + _PIECE])
                channel.send_exit_status(status)
            except (OSError, EOFError):
                pass
            finally:
                channel.close()

        thread = threading.Thread(target=reply, daemon=True)
        thread.start()
        self.threads.append(thread)
        return True


@dataclass
class HostileNode:
    port: int
    host_key: paramiko.PKey

    def client(self) -> paramiko.SSHClient:
        """A client that knows (and checks) the node's host key."""
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.get_host_keys().add(f"[127.0.0.1]:{self.port}", self.host_key.get_name(),
                                   self.host_key)
        client.connect("127.0.0.1", self.port, username="ray", pkey=paramiko.ECDSAKey.generate(),
                       look_for_keys=False, allow_agent=False, timeout=30)
        return client


@contextmanager
def hostile_node(tree: Tree | None = None, answer: Answer | None = None) -> Iterator[HostileNode]:
    """Serve `tree` over SFTP and `answer` to exec requests until the block ends."""
    host_key = paramiko.ECDSAKey.generate()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    transports: list[paramiko.Transport] = []
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            transport = paramiko.Transport(sock)
            transport.add_server_key(host_key)
            transport.set_subsystem_handler("sftp", paramiko.SFTPServer, _sftp_for(tree or Tree()))
            transport.start_server(server=_Server(answer))
            transports.append(transport)

    acceptor = threading.Thread(target=serve, daemon=True)
    acceptor.start()
    try:
        yield HostileNode(listener.getsockname()[1], host_key)
    finally:
        stopping.set()
        with suppress(OSError):  # wakes the accept (a close alone does not, on Linux)
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for transport in transports:
            transport.close()
        acceptor.join(timeout=10)
