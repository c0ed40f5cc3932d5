"""The fake's record of who created a node names the process at the other end of that very
connection (tests/fakes/compute/peers.py), even when another process listens on the same port
number at another loopback address."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.fakes.compute.peers import peer_process

LISTEN = """
import socket, sys
server = socket.socket()
server.bind(("127.0.0.2", 0))
server.listen()
print(server.getsockname()[1], flush=True)
sys.stdin.read()
"""


def test_a_client_port_another_process_listens_on_elsewhere_names_the_client() -> None:
    other = subprocess.Popen([sys.executable, "-c", LISTEN], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        port = int(other.stdout.readline())
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            with socket.socket() as client:
                client.bind(("127.0.0.1", port))  # the listener's number, another address
                client.connect(server.getsockname())
                accepted, (_, client_port) = server.accept()
                with accepted:
                    assert client_port == port
                    pid, command = peer_process(client_port, server.getsockname()[1])
        assert pid == os.getpid() != other.pid
        assert command == Path("/proc/self/cmdline").read_text().replace("\0", " ").strip()
    finally:
        other.kill()
        other.wait()
