"""Host-key pinning, key handling and the one-line connection errors, against a real sshd."""

from __future__ import annotations

import io
import socket
import threading

import paramiko
import pytest

from ops.errors import OpsError
from ops.remote.ssh import Connector
from ops.stacks.stack import load_outputs, parse_outputs
from tests.support.sshd_server import keygen, stack_outputs_for


def test_first_connection_pins_host_key_and_prints_fingerprint(first_contact_stack, sshd):
    stack = first_contact_stack
    announced = io.StringIO()
    with Connector(load_outputs(), announce=announced, trust_first_use=True) as connector:
        connector.head()
    host_key = paramiko.Ed25519Key.from_path(str(sshd.host_key))
    assert host_key.fingerprint in announced.getvalue()
    pinned = (stack.state_dir / "test" / "known_hosts").read_text()
    assert f"[127.0.0.1]:{sshd.port} ssh-ed25519 {host_key.get_base64()}" in pinned


def test_second_connection_trusts_pinned_key_silently(stack):
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        connector.head()
    announced = io.StringIO()
    with Connector(load_outputs(), announce=announced) as connector:
        connector.head()
    assert announced.getvalue() == ""


def test_changed_host_key_is_refused_with_clear_message(stack, sshd, tmp_path):
    impostor = paramiko.Ed25519Key.from_path(str(keygen(tmp_path / "impostor")))
    known_hosts = stack.state_dir / "test" / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{sshd.port} ssh-ed25519 {impostor.get_base64()}\n")
    with pytest.raises(OpsError) as refused, Connector(load_outputs()) as connector:
        connector.head()
    message = str(refused.value)
    assert "does not match" in message and "refusing" in message
    assert impostor.fingerprint in message and str(known_hosts) in message
    assert known_hosts.read_text().count("\n") == 1  # the pin was not replaced


def test_unreachable_head_names_ip_and_port(stack, sshd):
    from tests.support.sshd_server import free_port

    port = free_port()  # nothing listens there
    outputs = parse_outputs("test", stack_outputs_for(sshd, ssh_port=port))
    with pytest.raises(OpsError, match=rf"cannot reach the head at 127\.0\.0\.1:{port}"):
        Connector(outputs).head()


def test_a_head_that_hangs_up_during_the_handshake_is_one_line(stack, sshd):
    """As sshd does when it is stopped (a node shutting down, preempted) after its banner:
    paramiko raises a bare EOFError."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def hang_up() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            connection.recv(4096)  # the client's banner and key exchange offer

    threading.Thread(target=hang_up, daemon=True).start()
    outputs = parse_outputs("test", stack_outputs_for(sshd, ssh_port=port))
    try:
        with pytest.raises(OpsError) as raised:
            Connector(outputs, announce=io.StringIO()).head()
    finally:
        listener.close()
    assert str(raised.value) == (
        f"ssh to the head at 127.0.0.1:{port} failed: the connection closed during the SSH "
        "handshake (is the node shutting down, or sshd restarting? run again)")


def test_wrong_key_is_reported_as_auth_refused(stack, sshd, tmp_path):
    other_key = keygen(tmp_path / "other").read_text()
    outputs = parse_outputs("test", stack_outputs_for(sshd, ssh_private_key=other_key))
    with pytest.raises(OpsError, match=r"ssh auth refused by the head for \w+@127\.0\.0\.1"):
        Connector(outputs, announce=io.StringIO()).head()


def test_private_key_never_appears_in_repr_or_errors(stack, sshd):
    outputs = load_outputs()
    assert sshd.private_key.strip().splitlines()[1] not in repr(outputs)
    broken = parse_outputs("test", stack_outputs_for(sshd, ssh_private_key="not a key SECRET"))
    with pytest.raises(OpsError) as error:
        Connector(broken)
    assert "SECRET" not in str(error.value)


def test_worker_is_reached_through_the_head(stack):
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        worker = connector.outputs.node("ray-local-worker-0001")
        client = connector.node(worker)
        assert client is not connector.head()
        assert client is connector.node(worker)  # one client per host, reused
        _, stdout, _ = client.exec_command("echo through-jump")
        assert stdout.read() == b"through-jump\n"
