"""Warm connections (ops.remote.warm, ops.remote.warm_daemon): after one direct connection,
exec, submit, status and the sync run over the transport a background process keeps, which
only its user may reach; without a live one they connect directly again. Every daemon a test
starts is stopped by the test (the session-end check counts any left running)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.remote.openssh import control_folder, control_prefix
from ops.remote.warm import stop_daemon
from tests.support.other_user import answered_as_nobody
from tests.support.socket_peers import daemon_pid, short
from tests.support.sshd_server import keygen
from tests.support.tools import require_tool
from tests.support.waiting import wait_for


@pytest.fixture
def warm_stack(stack, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """`stack` with warm connections on (idle timeout 60 s); its daemons stopped after."""
    stack.env = {**stack.env, "RAY_GCP_SSH_PERSIST": "60"}
    monkeypatch.setenv("RAY_GCP_SSH_PERSIST", "60")
    yield stack
    left = daemon_sockets(stack)
    for path in left:
        with contextlib.suppress(OSError):
            os.kill(daemon_pid(path), signal.SIGKILL)
    for path in openssh_masters(stack):  # SO_PEERCRED names the process that forked it
        subprocess.run([require_tool("ssh"), "-o", f"ControlPath={path}", "-O", "exit", "node"],
                       capture_output=True)
        left.append(path)
    wait_for(lambda: not any(_answers(path) for path in left),
             "the test's warm connections to end")


def daemon_sockets(stack) -> list[Path]:
    return sorted((stack.state_dir / stack.name).glob("warm-*.sock"))


def openssh_masters(stack) -> list[Path]:
    """The ControlMaster sockets rsync-up's OpenSSH left for the stack (ops.remote.openssh)."""
    prefix = control_prefix(stack.state_dir / stack.name / "known_hosts")
    return sorted(control_folder().glob(f"{prefix}-*"))


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(short(path))
        except OSError:
            return False
    return True


DAEMON_START_S = 120
"""A daemon's start is a cold interpreter, its imports and an SSH key exchange, in the
background: a whole suite on two cores (a load average of 25) once took over 30 s for it."""


def warm_up(stack) -> Path:
    """One exec (direct), then its daemon's socket once it listens."""
    assert stack.invoke("exec", "true").returncode == 0
    wait_for(lambda: daemon_sockets(stack), "a warm connection listening", DAEMON_START_S)
    return daemon_sockets(stack)[0]


def with_unauthorized_key(stack, tmp_path: Path) -> None:
    """Outputs whose key the sshd does not accept: only a warm connection still gets in."""
    outputs = json.loads(stack.outputs_file.read_text())
    outputs["ssh_private_key"] = keygen(tmp_path / "stranger").read_text()
    stack.write_outputs(outputs)


def test_exec_submit_status_and_rsync_reuse_the_warm_connection(warm_stack, tmp_path,
                                                                submitted_script):
    path = warm_up(warm_stack)
    with_unauthorized_key(warm_stack, tmp_path)  # a new handshake would now be refused

    result = warm_stack.invoke("exec", "echo out; echo err >&2; exit 5")
    assert (result.returncode, result.stdout, result.stderr) == (5, "out\n", "err\n")
    script = submitted_script(tmp_path, "import sys; print('args', sys.argv[1:])\n")
    submitted = warm_stack.invoke("submit", str(script), "--", "a b", "c")
    assert (submitted.returncode, submitted.stdout) == (0, "args ['a b', 'c']\n")
    source = tmp_path / "sent.bin"
    source.write_bytes(os.urandom(6 << 20))  # enough pipelined SFTP writes to collect acks
    target = tmp_path / "received.bin"
    over_sftp = {**warm_stack.env, "RAY_GCP_SYNC": "sftp"}  # not the tar streams over OpenSSH
    assert warm_stack.invoke("rsync-up", str(source), str(target), env=over_sftp).returncode == 0
    assert target.read_bytes() == source.read_bytes()
    back = tmp_path / "back.bin"
    assert warm_stack.invoke("rsync-down", str(target), str(back), env=over_sftp).returncode == 0
    assert back.read_bytes() == source.read_bytes()
    assert daemon_sockets(warm_stack) == [path]  # one daemon served them all

    os.kill(daemon_pid(path), signal.SIGTERM)
    wait_for(lambda: not _answers(path), "the warm connection to end")
    refused = warm_stack.invoke("exec", "true")  # direct again, with the wrong key
    assert refused.returncode != 0
    assert "auth refused" in refused.stderr and "Traceback" not in refused.stderr


def test_a_dead_daemons_socket_falls_back_to_a_direct_connection(warm_stack):
    path = warm_up(warm_stack)
    os.kill(daemon_pid(path), signal.SIGKILL)  # no clean-up: the socket file stays
    wait_for(lambda: not _answers(path), "the killed daemon to stop answering")
    assert path.exists()
    result = warm_stack.invoke("exec", "echo direct")
    assert (result.returncode, result.stdout) == (0, "direct\n")
    wait_for(lambda: _answers(path), "a new daemon in its place",  # stopped after the test
             DAEMON_START_S)


def test_a_stopped_daemon_leaves_no_socket_and_exec_connects_directly(warm_stack):
    path = warm_up(warm_stack)
    assert stop_daemon(path)
    wait_for(lambda: not path.exists(), "the stopped daemon to remove its socket")
    result = warm_stack.invoke("exec", "echo direct")
    assert (result.returncode, result.stdout) == (0, "direct\n")
    wait_for(lambda: _answers(path), "a new daemon in its place",  # stopped after the test
             DAEMON_START_S)


IDLE_S = 5
"""The idle daemon's timeout: its socket is there for about that long, and the test must see it
there. With 1 s, a fresh clone's whole suite on two cores (load average near 6) once saw no
socket within 120 s; a 50 ms poll from a worker that busy can miss a one-second window, so
the window is wider, at the cost of a few seconds' wait."""


def test_a_daemon_exits_once_idle(warm_stack):
    warm_stack.env = {**warm_stack.env, "RAY_GCP_SSH_PERSIST": str(IDLE_S)}
    path = warm_up(warm_stack)
    wait_for(lambda: not path.exists(), "the idle daemon to exit and remove its socket")


def test_without_persistence_no_daemon_is_started(stack):
    assert stack.invoke("exec", "true").returncode == 0  # RAY_GCP_SSH_PERSIST=0 (conftest)
    assert not daemon_sockets(stack)


def test_the_warm_socket_is_private_to_its_user(warm_stack):
    path = warm_up(warm_stack)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_another_user_gets_no_answer_even_through_an_open_socket(warm_stack):
    """Past the 0600 mode (opened up here), SO_PEERCRED still turns another uid away."""
    path = warm_up(warm_stack)
    assert not answered_as_nobody(path, b'{"ping": true}\n'), "another user was answered"
    assert stop_daemon(path)  # its owner still is


def test_a_key_pinned_anew_is_never_served_by_the_old_connection(warm_stack, sshd, tmp_path):
    """The socket is named for the pinned key: with another key pinned for the node, the
    old daemon is not asked, and the new transport checks the key and refuses it."""
    old = warm_up(warm_stack)
    known_hosts = warm_stack.state_dir / warm_stack.name / "known_hosts"
    other = keygen(tmp_path / "other_host_key")
    kind, blob = Path(f"{other}.pub").read_text().split()[:2]
    known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {kind} {blob}\n")

    refused = warm_stack.invoke("exec", "echo served")
    assert refused.returncode != 0 and "served" not in refused.stdout
    assert "does not match the one pinned" in refused.stderr
    assert daemon_sockets(warm_stack) == [old]  # no daemon for the wrong key


def test_rsync_up_leaves_an_openssh_master_the_next_one_reuses(warm_stack, tmp_path):
    source = tmp_path / "data.txt"
    source.write_text("first\n")
    target = tmp_path / "remote" / "data.txt"
    assert warm_stack.invoke("rsync-up", str(source), str(target)).returncode == 0
    wait_for(lambda: openssh_masters(warm_stack), "an OpenSSH master listening")
    master = openssh_masters(warm_stack)[0]
    assert stat.S_IMODE(master.stat().st_mode) == 0o600
    with_unauthorized_key(warm_stack, tmp_path)  # a new handshake would now be refused

    source.write_text("second\n")
    again = warm_stack.invoke("rsync-up", str(source), str(target))
    assert again.returncode == 0, again.stderr
    assert target.read_text() == "second\n"


def test_a_long_command_gets_its_warm_connection_while_it_runs(warm_stack):
    """The daemon starts a moment after the direct connection (not before a short command's
    output), and a long command does not hold it back: it listens while the command runs."""
    running = subprocess.Popen(warm_stack.spawn_args("exec", "sleep 8"), env=warm_stack.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: daemon_sockets(warm_stack), "a warm connection listening",
                 DAEMON_START_S)
        assert running.poll() is None  # the command still runs
    finally:
        running.kill()
        running.wait()


def process_environment(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)


def core_file_limit(pid: int) -> list[str]:
    """/proc/<pid>/limits' "Max core file size" soft and hard limits."""
    line = next(line for line in Path(f"/proc/{pid}/limits").read_text().splitlines()
                if line.startswith("Max core file size"))
    return line.split()[4:6]


def test_the_daemon_holds_no_secret_of_the_tasks_environment_and_dumps_no_core(warm_stack):
    """It holds the key and the Ray token: it starts with a minimal environment (not the
    task's PULUMI_CONFIG_PASSPHRASE) and can write no core file."""
    warm_stack.env = {**warm_stack.env, "PULUMI_CONFIG_PASSPHRASE": "the-passphrase",
                      "AWS_SECRET_ACCESS_KEY": "aws-secret", "LC_ALL": "C.UTF-8"}
    pid = daemon_pid(warm_up(warm_stack))
    environment = process_environment(pid)
    assert "PULUMI_CONFIG_PASSPHRASE" not in environment
    assert "AWS_SECRET_ACCESS_KEY" not in environment
    assert environment["RAY_GCP_SSH_PERSIST"] == "60" and environment["LC_ALL"] == "C.UTF-8"
    assert core_file_limit(pid) == ["0", "0"]
