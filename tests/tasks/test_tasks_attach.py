"""`invoke attach` in a real pseudo-terminal: typing runs remotely, forwards carry HTTP."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request

import pexpect
import pytest

from tests.support.sshd_server import PROJECT_ROOT, free_port
from tests.support.tools import require_tool


def spawn_attach(stack, *args: str) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable, ["-m", "invoke", "attach", *args], cwd=str(PROJECT_ROOT),
        env=stack.env, encoding="utf-8", timeout=30, dimensions=(40, 120),
    )
    # quoted so the echo of the typed line cannot be mistaken for the prompt itself
    child.sendline("export PS1='remote''$ '")
    child.expect_exact("remote$ ")
    return child


def test_attach_runs_typed_commands_in_a_sized_pty(stack):
    child = spawn_attach(stack)
    try:
        child.sendline("echo $((6*7)); stty size; tty")
        child.expect("42")
        child.expect(r"40 120")  # the remote PTY has the local terminal's size
        child.expect(r"/dev/pts/\d+")
        child.setwinsize(50, 132)  # SIGWINCH -> remote PTY resized
        child.sendline("stty size")
        child.expect("50 132")
        child.sendline("exit 3")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 3


def test_attach_to_worker_goes_through_the_head(stack):
    child = spawn_attach(stack, "--node", "ray-local-worker-0001")
    try:
        child.sendline("echo worker-$((2+3))")
        child.expect("worker-5")
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_port_forward_reaches_a_server_on_the_head(stack, dashboard):
    local_port = free_port()
    child = spawn_attach(stack, "-p", f"{local_port}:{dashboard}")
    try:
        url = f"http://127.0.0.1:{local_port}/"
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # ignore *_proxy
        with direct.open(url, timeout=30) as response:
            assert response.read() == b"dashboard says hi"
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()


def spawn_session(stack, *args: str) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable, ["-m", "invoke", "attach", *args], cwd=str(PROJECT_ROOT),
        env={**stack.env, "TERM": "xterm-256color"}, encoding="utf-8", timeout=30,
        dimensions=(40, 120),
    )


@pytest.fixture
def remote_sessions(home_stack):
    """The tmux/screen sockets of `home_stack`'s sessions; its servers are stopped afterwards."""
    sockets = home_stack.workdir / "sockets"
    yield sockets
    env = {**os.environ, "TMUX_TMPDIR": str(sockets), "SCREENDIR": str(sockets / "screen")}
    if shutil.which("tmux"):
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
    if shutil.which("screen"):
        subprocess.run(["screen", "-S", "ray", "-X", "quit"], env=env, capture_output=True)


SESSIONS = [
    pytest.param("--tmux", "\x02d", "tmux", id="tmux"),  # Ctrl-b d
    pytest.param("--screen", "\x01d", "screen", id="screen"),  # Ctrl-a d
]


@pytest.mark.parametrize(("flag", "detach_keys", "program"), SESSIONS)
def test_session_survives_detach_and_reattach(home_stack, remote_sessions, flag, detach_keys,
                                              program):
    require_tool(program)
    (remote_sessions / "screen").mkdir(mode=0o700)
    first = spawn_session(home_stack, flag)
    try:
        first.sendline("REMEMBERED=kept-$((40+2))")
        first.sendline("echo set-$((1+1))")
        first.expect_exact("set-2")
        first.send(detach_keys)
        first.expect(pexpect.EOF)
    finally:
        first.close()
    assert first.exitstatus == 0  # detaching ends the attach with success, the shell lives on

    second = spawn_session(home_stack, flag)
    try:
        second.sendline('echo "again:$REMEMBERED"')
        second.expect_exact("again:kept-42")  # the same shell: its variable survived
        second.sendline("exit")
        second.expect(pexpect.EOF)
    finally:
        second.close()
