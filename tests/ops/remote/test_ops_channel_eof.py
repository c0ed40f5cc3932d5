"""ops/remote/eof.py against a real OpenSSH sshd: our EOF after a command that ends at once
never reaches sshd after the channel's CLOSE, which makes sshd drop the whole connection (and
with it every node a fan-out reaches through the head)."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator

import paramiko
import pytest
from paramiko.common import MSG_CHANNEL_CLOSE, MSG_CHANNEL_EOF

from ops.remote.commands import run_captured
from ops.remote.eof import send_eof
from tests.support.sshd_server import LocalSshd
from tests.support.waiting import WAIT_SECONDS, wait_for

OURS_HELD_S = 0.5
"""How long our EOF is held at most: a thread descheduled on a busy machine. Ours is sent under
the channel's lock, so the channel's CLOSE cannot go out in that time and the bound is reached."""


@pytest.fixture
def connect(sshd: LocalSshd) -> Iterator[Callable[[float], paramiko.SSHClient]]:
    """Clients of the real sshd that hold each EOF until our CLOSE of its channel has gone out,
    for at most the given seconds: the order the race produces when it is lost, made certain."""
    clients: list[paramiko.SSHClient] = []

    def connected(held_s: float) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.connect("127.0.0.1", sshd.port, username=sshd.user,
                       pkey=paramiko.Ed25519Key.from_private_key(io.StringIO(sshd.private_key)),
                       allow_agent=False, look_for_keys=False, timeout=30)
        clients.append(client)
        transport = client.get_transport()
        send = transport._send_user_message  # noqa: SLF001 - paramiko's one way out for a message
        closed: set[bytes] = set()  # recipient channels our CLOSE went out for
        gone = threading.Condition()

        def held(message: paramiko.Message) -> None:
            kind, recipient = message.asbytes()[:1], message.asbytes()[1:5]
            if kind == bytes([MSG_CHANNEL_EOF]):
                with gone:
                    gone.wait_for(lambda: recipient in closed, timeout=held_s)
            send(message)
            if kind == bytes([MSG_CHANNEL_CLOSE]):
                with gone:
                    closed.add(recipient)
                    gone.notify_all()

        transport._send_user_message = held  # noqa: SLF001
        return client

    yield connected
    for client in clients:
        client.close()


def command_ended(client: paramiko.SSHClient, eof: Callable[[paramiko.Channel], None]) -> int:
    """`true` run, then our EOF sent by `eof`."""
    channel = client.get_transport().open_session()
    try:
        channel.exec_command("true")
        eof(channel)
        return channel.recv_exit_status()
    finally:
        channel.close()


def test_paramikos_own_eof_after_a_quick_command_ends_the_connection(connect):
    """The race itself, so the test below can fail: paramiko/paramiko#1115, #1705."""
    client = connect(WAIT_SECONDS)
    command_ended(client, paramiko.Channel.shutdown_write)

    wait_for(lambda: not client.get_transport().is_active(),
             "sshd dropped the connection that sent an EOF after its channel's CLOSE")


def test_our_eof_after_a_quick_command_keeps_the_connection(connect):
    client = connect(OURS_HELD_S)
    for _ in range(3):
        assert command_ended(client, send_eof) == 0

    assert client.get_transport().is_active()
    assert run_captured(client, "echo alive") == (0, "alive\n", "")
