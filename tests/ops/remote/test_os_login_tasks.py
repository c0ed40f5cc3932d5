"""With OS Login the tasks log in with a key of your own, made on this machine, in your OS Login
profile for a few hours, and never with the cluster's key (which sits on the head, readable by
every Ray job). Through the real google-auth and google-api-python-client (the `oslogin`
discovery document it ships) against the fake OS Login (tests/fakes/oslogin.py), and a real
sshd that takes keys only as an OS Login VM does: its AuthorizedKeysCommand asks the fake's
metadata view for the user's unexpired keys (tests/fakes/oslogin_authorized_keys.py)."""

from __future__ import annotations

import getpass
import io
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from ops.remote.os_login import (
    ACCOUNT_ENV,
    ENDPOINT_ENV,
    KEY_FILE,
    KEY_LIFETIME,
    RENEW_WITHIN,
    clean_profile,
    login_key,
    public_line,
)
from ops.remote.ssh import Connector
from ops.remote.warm import stop_daemon
from ops.stacks.stack import load_outputs
from tests.fakes.compute.identity import USER
from tests.fakes.oslogin import FakeOsLogin
from tests.support.sshd_fixture import make_stack
from tests.support.sshd_server import LocalSshd, TestStack, stack_outputs_for
from tests.support.waiting import wait_for

ACCOUNT = USER.rsplit("/", 1)[-1]  # the session's user (tests/conftest.py), by its email
SYSTEM_PYTHON = Path("/usr/bin/python3")  # sshd runs only root-owned AuthorizedKeysCommands
KEYS_COMMAND = Path(__file__).parents[2] / "fakes" / "oslogin_authorized_keys.py"


class OsLoginVm:
    """The fake OS Login, and a real sshd logging users in as an OS Login VM does."""

    def __init__(self, fake: FakeOsLogin, sshd: LocalSshd) -> None:
        self.fake, self.sshd = fake, sshd

    def logs_in(self, private_key: str, user: str | None = None) -> bool:
        """Whether `private_key` opens a session as `user` (the POSIX user) on the VM."""
        key = paramiko.Ed25519Key.from_private_key(io.StringIO(private_key))
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            client.connect("127.0.0.1", self.sshd.port, username=user or self.sshd.user,
                           pkey=key, allow_agent=False, look_for_keys=False, timeout=10)
            return True
        except paramiko.AuthenticationException:
            return False
        finally:
            client.close()


@pytest.fixture
def vm(local_sshd: type[LocalSshd], tmp_path: Path) -> Iterator[OsLoginVm]:
    if not SYSTEM_PYTHON.is_file():
        pytest.skip("no /usr/bin/python3 for the sshd's AuthorizedKeysCommand")
    with FakeOsLogin({ACCOUNT: getpass.getuser()}) as fake:
        folder = tmp_path / "vm"
        folder.mkdir()
        lines = ["AuthorizedKeysFile none",
                 f"AuthorizedKeysCommand {SYSTEM_PYTHON} {KEYS_COMMAND} "
                 f"http://{fake.endpoint} %u",
                 f"AuthorizedKeysCommandUser {getpass.getuser()}"]
        with local_sshd(folder, keys_lines=lines) as sshd:
            yield OsLoginVm(fake, sshd)


@pytest.fixture
def stack(vm: OsLoginVm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TestStack:
    """A stack whose head and worker are the OS Login VM; the YAML's ssh_user exists nowhere;
    your Application Default Credentials are the session's (ACCOUNT's)."""
    made = make_stack(vm.sshd, tmp_path, monkeypatch, pin=True)
    made.write_outputs(stack_outputs_for(vm.sshd, ssh_user="nobody-here", os_login=True,
                                         os_login_account=ACCOUNT))
    monkeypatch.setenv(ENDPOINT_ENV, vm.fake.endpoint)
    made.env[ENDPOINT_ENV] = vm.fake.endpoint
    return made


def your_key(stack: TestStack) -> Path:
    return stack.state_dir / stack.name / KEY_FILE


def only_key(vm: OsLoginVm) -> dict[str, str]:
    (entry,) = vm.fake.profile_keys(ACCOUNT).values()
    return entry


def test_exec_imports_a_key_of_your_own_that_expires_and_logs_in_with_it(stack, vm):
    before = time.time()
    result = stack.invoke("exec", "-A", "whoami")
    assert result.returncode == 0, result.stderr
    assert sorted(line.split()[-1] for line in result.stdout.splitlines()) == [vm.sshd.user] * 2
    entry = only_key(vm)
    private = your_key(stack).read_text()
    assert entry["key"].split() == public_line(private).split()
    assert entry["key"].split()[:2] != public_line(vm.sshd.private_key).split()[:2]
    assert entry["key"].startswith("ssh-ed25519 ")
    assert stat.S_IMODE(your_key(stack).stat().st_mode) == 0o600
    expiry = int(entry["expirationTimeUsec"]) / 1e6
    assert before + KEY_LIFETIME - 5 < expiry < time.time() + KEY_LIFETIME + 5
    # The second task finds it there, far from expiry: nothing is imported again.
    calls = len(vm.fake.calls)
    assert stack.invoke("exec", "true").returncode == 0
    assert [method for _, method, _ in vm.fake.calls[calls:]] == ["get_login_profile"]


def test_the_cluster_key_on_the_head_cannot_log_in_as_you_on_an_os_login_vm(stack, vm):
    assert stack.invoke("exec", "true").returncode == 0
    cluster_key = vm.sshd.private_key  # the stack's key: ~/ray_bootstrap_key.pem on the head
    assert not vm.logs_in(cluster_key)
    assert vm.logs_in(your_key(stack).read_text())


def test_an_expired_key_is_refused_by_the_vm_and_renewed_by_the_next_task(stack, vm):
    assert stack.invoke("exec", "true").returncode == 0
    private = your_key(stack).read_text()
    vm.fake.expire(ACCOUNT, only_key(vm)["fingerprint"])
    assert not vm.logs_in(private)
    result = stack.invoke("exec", "whoami")
    assert result.returncode == 0, result.stderr
    assert your_key(stack).read_text() == private  # the same key, its expiry moved
    assert int(only_key(vm)["expirationTimeUsec"]) / 1e6 > time.time() + KEY_LIFETIME - 60
    assert "patch_key" in [method for _, method, _ in vm.fake.calls]
    assert vm.logs_in(private)


def test_a_key_near_its_expiry_is_renewed_before_it_lapses(stack, vm):
    assert stack.invoke("exec", "true").returncode == 0
    soon = int((time.time() + RENEW_WITHIN / 2) * 1e6)
    fingerprint = only_key(vm)["fingerprint"]
    vm.fake.keys[ACCOUNT][fingerprint]["expirationTimeUsec"] = str(soon)
    assert stack.invoke("exec", "true").returncode == 0
    assert int(only_key(vm)["expirationTimeUsec"]) > soon


def test_a_stack_made_before_per_user_keys_loses_the_cluster_key_from_the_profile(stack, vm):
    """Older versions imported the cluster's key, without expiry: a job on the head could log
    in as you anywhere. The next task removes it, and says so."""
    vm.fake.seed(ACCOUNT, public_line(vm.sshd.private_key), "test-project")
    assert vm.logs_in(vm.sshd.private_key)  # what was open before
    result = stack.invoke("exec", "true")
    assert result.returncode == 0, result.stderr
    assert "removed the cluster's key" in result.stderr
    assert not vm.logs_in(vm.sshd.private_key)
    assert only_key(vm)["key"].split() == public_line(your_key(stack).read_text()).split()


def test_down_removes_your_key_and_the_cluster_key_from_the_profile_and_this_machine(
        stack, vm):
    """What `invoke down` does after the destroy (ops.lifecycle.down_workers;
    tests/engine/test_engine_os_login_profile.py runs it through `invoke down`)."""
    assert stack.invoke("exec", "true").returncode == 0
    private = your_key(stack).read_text()
    vm.fake.seed(ACCOUNT, public_line(vm.sshd.private_key), "test-project")
    clean_profile(load_outputs(), io.StringIO(), own_key=True)
    assert vm.fake.profile_keys(ACCOUNT) == {}
    assert not your_key(stack).exists()
    assert not vm.logs_in(private)


def test_credentials_of_another_account_cannot_import_into_yours_in_one_line(stack, vm,
                                                                            tmp_path):
    """Your credentials cannot put a key into someone else's profile (nor ours into theirs)."""
    vm.fake.accounts["other@example.com"] = "other"
    stack.env["GOOGLE_APPLICATION_CREDENTIALS"] = str(
        vm.fake.credentials_file("other@example.com", tmp_path))
    result = stack.invoke("exec", "true")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert ACCOUNT in line and "HTTP 403" in line and "own profile" in line
    assert vm.fake.profile_keys(ACCOUNT) == {}


def test_ssh_config_names_the_os_login_user_and_your_key(stack, vm):
    assert stack.invoke("ssh-config").returncode == 0
    config = (stack.state_dir / "test" / "ssh_config").read_text()
    assert f"    User {vm.sshd.user}\n" in config and "nobody-here" not in config
    assert f"    IdentityFile {your_key(stack).resolve()}\n" in config
    assert not (stack.state_dir / "test" / "id_ssh").exists()  # no copy of the cluster key


def test_an_account_without_the_os_login_role_is_refused_at_login_in_one_line(stack, vm):
    """OS Login checks the role when you log in (the VM asks), not when you import a key."""
    vm.fake.login_role.clear()
    result = stack.invoke("exec", "true")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert "ssh auth refused" in line and "roles/compute.osAdminLogin" in line
    assert not vm.logs_in(your_key(stack).read_text())


def test_a_group_principal_asks_for_the_account_then_uses_it(stack, vm, monkeypatch):
    stack.write_outputs(stack_outputs_for(vm.sshd, os_login=True, os_login_account=""))
    result = stack.invoke("exec", "true")
    assert result.returncode == 1 and f"set {ACCOUNT_ENV}" in result.stderr
    monkeypatch.setenv(ACCOUNT_ENV, ACCOUNT)
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        assert connector.login_user() == vm.sshd.user
        connector.head()
    assert list(vm.fake.profile_keys(ACCOUNT).values())[0]["key"].startswith("ssh-ed25519 ")


def test_without_credentials_the_tasks_say_how_to_get_them(stack, vm):
    stack.env["GOOGLE_APPLICATION_CREDENTIALS"] = str(stack.workdir / "missing.json")
    result = stack.invoke("exec", "true")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "gcloud auth application-default login" in result.stderr


def test_your_key_file_must_be_yours_and_not_a_link(stack, vm, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("not a key\n")
    your_key(stack).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(elsewhere, your_key(stack))
    result = stack.invoke("exec", "true")
    assert result.returncode == 1 and "symbolic link" in result.stderr


def test_rsync_up_over_the_systems_ssh_logs_in_with_your_key(stack, vm, tmp_path):
    """The tar stream runs the system's OpenSSH (ops.remote.openssh), handed your key."""
    source, remote = tmp_path / "src", tmp_path / "remote"
    source.mkdir()
    (source / "a.txt").write_text("alpha\n")
    result = stack.invoke("rsync-up", str(source), str(remote))
    assert result.returncode == 0, result.stderr
    assert (remote / "a.txt").read_text() == "alpha\n"


def test_the_warm_connection_logs_in_with_your_key_too(stack, vm, tmp_path):
    """The background daemon a task starts connects as the task does (ops.remote.warm)."""
    stack.env = {**stack.env, "RAY_GCP_SSH_PERSIST": "60"}
    assert stack.invoke("exec", "true").returncode == 0
    folder = stack.state_dir / stack.name
    wait_for(lambda: list(folder.glob("warm-*.sock")), "a warm connection listening")
    try:
        vm.fake.keys[ACCOUNT].clear()  # a new login would now be refused
        result = stack.invoke("exec", "whoami")
        assert (result.returncode, result.stdout) == (0, f"{vm.sshd.user}\n"), result.stderr
        assert vm.fake.profile_keys(ACCOUNT) == {}  # served warm: nothing imported again
    finally:
        for path in folder.glob("warm-*.sock"):
            stop_daemon(path)


def test_down_without_credentials_warns_in_one_line_and_deletes_your_key_here(
        stack, vm, monkeypatch):
    assert stack.invoke("exec", "true").returncode == 0
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(stack.workdir / "missing.json"))
    said = io.StringIO()
    clean_profile(load_outputs(), said, own_key=True)
    (line,) = said.getvalue().splitlines()
    assert line.startswith("warning: ") and "until it expires" in line
    assert not your_key(stack).exists()


def test_your_key_in_the_profile_without_a_posix_account_here_is_imported_for_the_project(
        stack, vm):
    yours = login_key(stack.name)
    vm.fake.seed(ACCOUNT, yours.public, "another-project", expiry_usec=2**62)
    result = stack.invoke("exec", "whoami")
    assert (result.returncode, result.stdout) == (0, f"{vm.sshd.user}\n"), result.stderr
    assert "test-project" in vm.fake.projects[ACCOUNT]


def test_an_os_login_api_this_machine_cannot_reach_is_one_line_naming_the_setting(stack, vm):
    """A name that never resolves (RFC 2606's `.invalid`): httplib2, under the API client,
    raises its own ServerNotFoundError, not an OSError."""
    stack.env[ENDPOINT_ENV] = "oslogin.nowhere.invalid:80"
    result = stack.invoke("exec", "true")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: cannot reach the OS Login API (Unable to find the server at "
                           "oslogin.nowhere.invalid)"), line
    assert f"{ENDPOINT_ENV}=oslogin.nowhere.invalid:80" in line and "a bug" not in line
