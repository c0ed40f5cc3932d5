"""A request to a per-user background process's unix socket from another user (`nobody`), as
root: what SO_PEERCRED must turn away even when the socket's mode would let it in."""

from __future__ import annotations

import os
import socket
from pathlib import Path

NOBODY = 65534


def answered_as_nobody(path: Path, request: bytes) -> bool:
    """Open `path` (and its folder) to everyone, send `request` from a child switched to
    nobody, close them again; whether the child got any answer."""
    path.parent.chmod(0o711)
    path.chmod(0o666)
    child = os.fork()
    if child == 0:  # connect as nobody, from the socket's folder
        answer = b"error"
        try:
            os.chdir(path.parent)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(path.name)
                try:
                    client.sendall(request)
                    answer = client.makefile("rb").readline()
                except (BrokenPipeError, ConnectionResetError):  # closed without reading
                    answer = b""
        finally:
            os._exit(0 if answer == b"" else 1)
    _, status = os.waitpid(child, 0)
    path.parent.chmod(0o700)
    path.chmod(0o600)
    return os.waitstatus_to_exitcode(status) != 0
