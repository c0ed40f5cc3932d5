"""Host keys against a real sshd: checked against the keys GCE publishes (the fake Compute API
answers `instances.getGuestAttributes` through Compute's REST API), known_hosts
lines that cannot be read fail closed, and key files are never written through a symlink."""

from __future__ import annotations

import io
import os
import stat

import paramiko
import pytest

from ops.errors import OpsError
from ops.remote.host_keys import COMPUTE_ENDPOINT_ENV, published_host_keys
from ops.remote.ssh import Connector
from ops.remote.ssh_config import write_ssh_config
from ops.stacks.stack import load_outputs
from tests.fakes.compute import FakeComputeServer
from tests.support.sshd_server import keygen, stack_outputs_for

PROJECT, ZONE, HEAD = "test-project", "us-west1-a", "ray-local-head-0000"


@pytest.fixture
def stack(first_contact_stack):
    """These tests meet the host key for the first time: nothing pinned."""
    return first_contact_stack


@pytest.fixture
def gce(monkeypatch):
    """The fake Compute API, where ops.remote.host_keys asks for published host keys."""
    with FakeComputeServer() as fake:
        monkeypatch.setenv(COMPUTE_ENDPOINT_ENV, fake.endpoint)
        yield fake


def publish(fake: FakeComputeServer, key: paramiko.PKey) -> None:
    # The guest agent's shape: key type under hostkeys/, the base64 blob as value.
    fake.guest_attributes[(PROJECT, ZONE, HEAD)] = {
        f"hostkeys/{key.get_name()}": key.get_base64() + "\n",
        "ray-bootstrap/status": "ready",
    }


def known_hosts(stack):
    return stack.state_dir / "test" / "known_hosts"


def test_a_key_gce_publishes_is_pinned_and_said_so(stack, sshd, gce):
    host_key = paramiko.Ed25519Key.from_path(str(sshd.host_key))
    publish(gce, host_key)
    announced = io.StringIO()
    with Connector(load_outputs(), announce=announced) as connector:
        connector.head()
    assert f"matches the key GCE publishes for {HEAD}" in announced.getvalue()
    assert host_key.get_base64() in known_hosts(stack).read_text()
    assert gce.cloud.calls["getGuestAttributes"] == 1


def test_a_key_gce_does_not_publish_is_refused_and_not_pinned(stack, sshd, gce, tmp_path):
    publish(gce, paramiko.Ed25519Key.from_path(str(keygen(tmp_path / "genuine"))))
    with pytest.raises(OpsError) as refused, Connector(load_outputs()) as connector:
        connector.head()
    message = str(refused.value)
    assert "none of the host keys GCE publishes for instance ray-local-head-0000" in message
    assert "refusing" in message and "\n" not in message
    assert known_hosts(stack).read_text() == ""


def test_nothing_published_is_refused_saying_why_and_how_to_accept_once(stack, sshd, gce):
    with pytest.raises(OpsError) as refused, Connector(load_outputs()) as connector:
        connector.head()
    message = str(refused.value)
    assert "cannot be checked: GCE publishes no key for ray-local-head-0000" in message
    assert "none published yet" in message and "--trust-first-use" in message
    assert "\n" not in message
    assert known_hosts(stack).read_text() == ""


def test_an_unreachable_api_is_refused_not_trusted(stack, sshd, monkeypatch):
    monkeypatch.setenv(COMPUTE_ENDPOINT_ENV, "127.0.0.1:9")  # nothing listens there
    with pytest.raises(OpsError, match="could not ask the Compute API.*--trust-first-use"), \
            Connector(load_outputs()) as connector:
        connector.head()
    assert known_hosts(stack).read_text() == ""


def test_trust_first_use_pins_an_unpublished_key_once_and_says_so(stack, sshd, gce):
    announced = io.StringIO()
    with Connector(load_outputs(), announce=announced, trust_first_use=True) as connector:
        connector.head()
    assert "trusted on first use (--trust-first-use): GCE publishes no key for " \
        "ray-local-head-0000" in announced.getvalue()
    assert known_hosts(stack).read_text().count("\n") == 1
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        connector.head()  # pinned now: no flag needed


def test_the_key_is_looked_up_in_the_nodes_own_zone(stack, sshd, gce):
    outputs = stack_outputs_for(sshd)
    for node in outputs["nodes"]:
        node["zone"] = "us-west1-c"
    stack.write_outputs(outputs)
    host_key = paramiko.Ed25519Key.from_path(str(sshd.host_key))
    gce.guest_attributes[(PROJECT, "us-west1-c", HEAD)] = {
        f"hostkeys/{host_key.get_name()}": host_key.get_base64()}
    announced = io.StringIO()
    with Connector(load_outputs(), announce=announced) as connector:
        connector.head()
    assert "matches the key GCE publishes" in announced.getvalue()


def test_published_keys_come_through_the_compute_client(gce, tmp_path):
    blob = paramiko.Ed25519Key.from_path(str(keygen(tmp_path / "key"))).get_base64()
    gce.guest_attributes[(PROJECT, ZONE, HEAD)] = {"hostkeys/ssh-ed25519": f"{blob}\n",
                                                   "other/x": "y"}
    assert published_host_keys(PROJECT, ZONE, HEAD).keys == {blob}
    missing = published_host_keys(PROJECT, ZONE, "ray-other-node")
    assert missing.keys == frozenset() and "none published" in missing.reason


@pytest.mark.parametrize("line", [
    "[127.0.0.1]:{port} ssh-ed25519 AAAAC3NzaC1lZDI1",  # truncated
    "[127.0.0.1]:{port} ssh-ed25519",  # no key
    "[127.0.0.1]:{port} ssh-unknown AAAAB3NzaC1yc2E=",  # a type we cannot check
    "[127.0.0.1]:{port} ssh-ed25519 !!!not-base64",
])
def test_a_known_hosts_line_that_cannot_be_read_fails_closed(stack, sshd, line):
    path = known_hosts(stack)
    path.parent.mkdir(parents=True)
    host_key = paramiko.Ed25519Key.from_path(str(sshd.host_key))
    path.write_text(f"# pins\nother.example ssh-ed25519 {host_key.get_base64()}\n"
                    + line.format(port=sshd.port) + "\n")
    before = path.read_text()
    with pytest.raises(OpsError) as refused, Connector(load_outputs()) as connector:
        connector.head()
    message = str(refused.value)
    assert message.startswith(f"{path} line 3 cannot be read (") and "\n" not in message
    assert "fix or delete that line" in message
    assert path.read_text() == before  # nothing pinned in its place


def test_known_hosts_planted_as_a_symlink_is_refused(stack, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("")
    path = known_hosts(stack)
    path.parent.mkdir(parents=True)
    path.symlink_to(target)
    with pytest.raises(OpsError, match="is a symbolic link: refusing to open it"):
        Connector(load_outputs())
    assert target.read_text() == ""


def test_ssh_config_does_not_write_the_key_through_a_planted_symlink(stack, tmp_path):
    target = tmp_path / "stolen"
    key_path = stack.state_dir / "test" / "id_ssh"
    key_path.parent.mkdir(parents=True)
    key_path.symlink_to(target)
    with pytest.raises(OpsError, match="id_ssh is a symbolic link"):
        write_ssh_config(load_outputs(), known_hosts(stack), "ubuntu")
    assert not target.exists()


def test_state_directory_is_tightened_to_0700(stack, sshd):
    directory = stack.state_dir / "test"
    directory.mkdir(parents=True, mode=0o755)
    directory.chmod(0o755)
    with Connector(load_outputs(), announce=io.StringIO()):
        pass
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_a_symlinked_state_directory_is_refused(stack, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    stack.state_dir.mkdir(parents=True)
    (stack.state_dir / "test").symlink_to(elsewhere)
    with pytest.raises(OpsError, match="is a symbolic link"):
        Connector(load_outputs())


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user takes root")
def test_a_state_directory_of_another_user_is_refused(stack):
    directory = stack.state_dir / "test"
    directory.mkdir(parents=True, mode=0o700)
    os.chown(directory, 4321, 4321)
    with pytest.raises(OpsError, match="belongs to user id 4321, not to you"):
        Connector(load_outputs())
    assert not (directory / "known_hosts").exists()


def test_a_state_parent_everyone_may_write_is_refused(stack):
    stack.state_dir.mkdir(parents=True)
    stack.state_dir.chmod(0o777)
    with pytest.raises(OpsError, match="writable by everyone"):
        Connector(load_outputs())
    assert not (stack.state_dir / "test").exists()
