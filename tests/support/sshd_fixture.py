"""pytest fixtures `sshd` (one real sshd per session, per worker), `stack` (outputs + state
per test), `home_stack` (a stack on an sshd of its own) and `local_sshd` (for a test that runs
sshds of its own settings): each marks its test `sshd` (tests/conftest.py loads them).
`submitted_script` names the scripts a test hands to `invoke submit`.
"""

from __future__ import annotations

import os
import pwd
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.sshd_server import (
    CLUSTER_YAML,
    LocalSshd,
    TestStack,
    http_server,
    pin_host_key,
    stack_outputs_for,
)


@pytest.fixture
def submitted_script() -> Iterator[Callable[[Path, str], Path]]:
    """`submitted_script(folder, source)`: a Python script in `folder` for `invoke submit`,
    named uniquely. The test sshds log every test in as this machine's user, so `submit` puts
    each test's script in that one home: two tests submitting `job.py` at once each ran
    whichever landed last. The uploaded copies are removed from that home afterwards."""
    names: list[str] = []

    def write(folder: Path, source: str) -> Path:
        script = folder / f"job_{uuid.uuid4().hex[:12]}.py"
        script.write_text(source)
        names.append(script.name)
        return script

    yield write
    home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    for name in names:
        (home / name).unlink(missing_ok=True)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory):
    server = LocalSshd(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


@pytest.fixture
def local_sshd() -> type[LocalSshd]:
    """The sshd to start with settings of the test's own (`local_sshd(folder, set_env=...,
    keys_lines=...)`, started and stopped by the test); marks the test `sshd`."""
    return LocalSshd


@pytest.fixture
def stack(sshd: LocalSshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TestStack:
    """Outputs file + state dir for one test, exported like a user's environment would be;
    the sshd's host key already pinned (ops.remote.ssh refuses a key it cannot check)."""
    return make_stack(sshd, tmp_path, monkeypatch, pin=True)


@pytest.fixture
def first_contact_stack(sshd: LocalSshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                        ) -> TestStack:
    """`stack` with nothing pinned yet: the first connection meets the host key."""
    return make_stack(sshd, tmp_path, monkeypatch, pin=False)


@pytest.fixture
def home_stack(local_sshd: type[LocalSshd], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A stack on an sshd of its own whose sessions get `workdir/home` as HOME and the PATH
    `home/fastbin:/usr/local/bin:/usr/bin:/bin`, so a test controls ~/.profile, what is on the
    PATH before any profile runs, and where tmux/screen keep their sockets."""
    home = tmp_path / "home"
    (home / "fastbin").mkdir(parents=True)
    sockets = tmp_path / "sockets"
    sockets.mkdir(mode=0o700)
    server_dir = tmp_path / "sshd"
    server_dir.mkdir()
    settings = {
        "HOME": str(home),
        "PATH": f"{home / 'fastbin'}:/usr/local/bin:/usr/bin:/bin",
        "TMUX_TMPDIR": str(sockets),
        "SCREENDIR": str(sockets / "screen"),
    }
    server = local_sshd(server_dir, set_env=settings).start()
    try:
        yield make_stack(server, tmp_path, monkeypatch, pin=True)
    finally:
        server.stop()


def make_stack(sshd: LocalSshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
               pin: bool) -> TestStack:
    mounts = tmp_path / "mounts"
    mounts.mkdir()
    (mounts / "data.txt").write_text("mounted\n")
    remote_mount = tmp_path / "remote-mount"
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(
        CLUSTER_YAML.replace("{remote}", str(remote_mount)).replace("{local}", str(mounts))
    )
    test_stack = TestStack(
        name="test",
        outputs_file=tmp_path / "outputs.json",
        state_dir=tmp_path / "state",
        workdir=tmp_path,
    )
    test_stack.write_outputs(stack_outputs_for(sshd, cluster_file=str(cluster_file)))
    if pin:
        pin_host_key(test_stack.state_dir, test_stack.name, sshd)
    settings = {
        "RAY_GCP_STACK_OUTPUTS": str(test_stack.outputs_file),
        "RAY_GCP_STATE_DIR": str(test_stack.state_dir),
        "PULUMI_STACK": test_stack.name,
        # No warm connections unless a test asks (test_ops_warm_ssh.py): a daemon outlives
        # the task that starts it, and the session-end check counts what is left running.
        "RAY_GCP_SSH_PERSIST": "0",
    }
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    test_stack.env = {**os.environ, **settings}
    return test_stack


DASHBOARD_BODY = b"dashboard says hi"


@pytest.fixture
def dashboard() -> Iterator[int]:
    """A stand-in for Ray's dashboard on the head (the head is this machine): its port."""
    with http_server(DASHBOARD_BODY) as port:
        yield port
