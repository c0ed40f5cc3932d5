"""With OS Login the tasks add the stack's key to your OS Login profile (the real
google-api-python-client and its shipped `oslogin` discovery document, against a fake on
127.0.0.1) and log in to the real sshd as the POSIX user name the answer gives."""

from __future__ import annotations

import io

import paramiko
import pytest
from fake_oslogin import FakeOsLogin
from sshd_server import TestStack, stack_outputs_for

from ops.remote.os_login import ACCOUNT_ENV, ENDPOINT_ENV
from ops.remote.ssh import Connector
from ops.stack import load_outputs
from tests.fake_compute.identity import USER

pytest_plugins = ["sshd_fixture"]  # the sshd and stack fixtures

ACCOUNT = USER.rsplit("/", 1)[-1]  # the session's user (tests/conftest.py), by its email


@pytest.fixture
def os_login(stack: TestStack, sshd):
    """OS Login knows ACCOUNT as the sshd's user; the YAML's ssh_user exists nowhere."""
    with FakeOsLogin({ACCOUNT: sshd.user}) as fake:
        stack.write_outputs(stack_outputs_for(sshd, ssh_user="nobody-here", os_login=True,
                                              os_login_account=ACCOUNT))
        stack.env[ENDPOINT_ENV] = fake.endpoint
        yield fake


def public_key_line(sshd) -> str:
    key = paramiko.Ed25519Key.from_private_key(io.StringIO(sshd.private_key))
    return f"{key.get_name()} {key.get_base64()}"


def test_exec_registers_the_stack_key_and_logs_in_as_the_posix_user_given(stack, sshd,
                                                                          os_login):
    result = stack.invoke("exec", "-A", "whoami")
    assert result.returncode == 0, result.stderr
    assert sorted(line.split()[-1] for line in result.stdout.splitlines()) == [sshd.user] * 2
    assert os_login.imported == [(ACCOUNT, "test-project", public_key_line(sshd))]


def test_ssh_config_names_the_os_login_user(stack, sshd, os_login):
    assert stack.invoke("ssh-config").returncode == 0
    config = (stack.state_dir / "test" / "ssh_config").read_text()
    assert f"    User {sshd.user}\n" in config and "nobody-here" not in config


def test_an_account_without_the_os_login_role_is_one_line_naming_it(stack, sshd, os_login):
    stack.write_outputs(stack_outputs_for(sshd, os_login=True,
                                          os_login_account="stranger@example.com"))
    result = stack.invoke("exec", "true")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert "stranger@example.com" in line and "HTTP 403" in line
    assert "roles/compute.osAdminLogin" in line


def test_a_group_principal_asks_for_the_account_then_uses_it(stack, sshd, os_login,
                                                             monkeypatch):
    stack.write_outputs(stack_outputs_for(sshd, os_login=True, os_login_account=""))
    result = stack.invoke("exec", "true")
    assert result.returncode == 1 and f"set {ACCOUNT_ENV}" in result.stderr
    for key, value in {**stack.env, ACCOUNT_ENV: ACCOUNT}.items():
        monkeypatch.setenv(key, value)
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        assert connector.login_user() == sshd.user
        connector.head()
    assert [account for account, _, _ in os_login.imported] == [ACCOUNT]
