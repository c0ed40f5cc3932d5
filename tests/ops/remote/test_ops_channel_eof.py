"""ops/remote/eof.py against a real OpenSSH sshd: our EOF after a command that ends at once
never reaches sshd after the channel's CLOSE, which makes sshd drop the whole connection (and
with it every node a fan-out reaches through the head)."""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator

import paramiko
import pytest

from ops.remote.commands import run_captured
from ops.remote.eof import send_eof
from tests.support.sshd_server import LocalSshd

HELD_S = 0.5
"""How long the thread sending an EOF is held before it sends: a thread descheduled on a busy
machine, the window in which the channel's close is answered first."""


@pytest.fixture
def client(sshd: LocalSshd) -> Iterator[paramiko.SSHClient]:
    """A client of the real sshd whose EOF messages are held HELD_S before they are sent."""
    connected = paramiko.SSHClient()
    connected.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    connected.connect("127.0.0.1", sshd.port, username=sshd.user,
                      pkey=paramiko.Ed25519Key.from_private_key(io.StringIO(sshd.private_key)),
                      allow_agent=False, look_for_keys=False, timeout=30)
    transport = connected.get_transport()
    send = transport._send_user_message  # noqa: SLF001 - paramiko's one way out for a message

    def held(message: paramiko.Message) -> None:
        if message.asbytes()[:1] == bytes([paramiko.common.MSG_CHANNEL_EOF]):
            time.sleep(HELD_S)
        send(message)

    transport._send_user_message = held  # noqa: SLF001
    yield connected
    connected.close()


def command_ended(client: paramiko.SSHClient, eof: Callable[[paramiko.Channel], None]) -> int:
    """`true` run, our EOF sent by `eof` once sshd has had time to end the command."""
    channel = client.get_transport().open_session()
    try:
        channel.exec_command("true")
        eof(channel)
        return channel.recv_exit_status()
    finally:
        channel.close()


def test_our_eof_after_a_quick_command_keeps_the_connection(client):
    for _ in range(3):
        assert command_ended(client, send_eof) == 0

    assert client.get_transport().is_active()
    assert run_captured(client, "echo alive") == (0, "alive\n", "")
