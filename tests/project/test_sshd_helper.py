"""The tests' own sshd (tests/support/sshd_server.py) serves its own host key on the port it
reports, even when another process takes its port between the pick and the start: with four
workers each starting sshds, one test met another worker's server there ("Host key for head
has changed")."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path


def test_an_sshd_whose_port_was_taken_meanwhile_serves_its_own_key_on_another(local_sshd,
                                                                               tmp_path):
    server = local_sshd(tmp_path)
    taken = server.port
    with socket.socket() as other:  # another worker's server, listening there first
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", taken))
        other.listen()
        with server:
            assert server.port != taken
            scanned = subprocess.run(
                ["ssh-keyscan", "-t", "ed25519", "-p", str(server.port), "127.0.0.1"],
                capture_output=True, text=True, timeout=30).stdout.split()
            assert scanned[1:3] == Path(f"{server.host_key}.pub").read_text().split()[:2]
