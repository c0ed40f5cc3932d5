"""`exec`/`submit` with --tmux/--screen/--port-forward, `submit --args`, `attach --new` and
`rsync-up --all-nodes`, as `ray` names them, against a real sshd (and real tmux/screen)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request

import pexpect
import pytest

from tests.support.sshd_server import PROJECT_ROOT, free_port, http_server
from tests.support.tools import require_tool
from tests.support.waiting import WAIT_SECONDS, wait_for


def _needs(program: str) -> None:
    require_tool(program)


@pytest.fixture
def sessions(home_stack):
    """tmux/screen sockets of `home_stack`'s sessions; its servers are stopped afterwards."""
    sockets = home_stack.workdir / "sockets"
    (sockets / "screen").mkdir(mode=0o700)
    env = {**os.environ, "TMUX_TMPDIR": str(sockets), "SCREENDIR": str(sockets / "screen")}
    yield env
    if shutil.which("tmux"):
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
    if shutil.which("screen"):
        subprocess.run(["screen", "-S", "ray", "-X", "quit"], env=env, capture_output=True)


@pytest.mark.parametrize("flag", ["--tmux", "--screen"])
def test_exec_detached_runs_in_the_ray_session_and_says_how_to_look(home_stack, sessions,
                                                                    flag):
    _needs(flag.removeprefix("--"))
    done = home_stack.workdir / "done"
    result = home_stack.invoke("exec", flag, f"echo ran-$((6*7)) > {done}")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Run `invoke attach {flag}` to check command status.\n"
    wait_for(lambda: done.exists() and done.read_text() == "ran-42\n", "the command ran")
    if flag == "--tmux":  # a window of the session `invoke attach --tmux` attaches to
        listed = subprocess.run(["tmux", "list-sessions", "-F", "#S"], env=sessions,
                                capture_output=True, text=True)
        assert listed.stdout.split() == ["ray"]
    else:
        listed = subprocess.run(["screen", "-ls"], env=sessions, capture_output=True, text=True)
        assert ".ray\t" in listed.stdout


def test_a_second_detached_exec_opens_another_window_of_the_same_session(home_stack,
                                                                          sessions):
    _needs("tmux")
    for number in (1, 2):
        assert home_stack.invoke("exec", "--tmux", f"sleep {WAIT_SECONDS}").returncode == 0
        windows = subprocess.run(["tmux", "list-windows", "-t", "ray:", "-F", "#I"],
                                 env=sessions, capture_output=True, text=True)
        assert len(windows.stdout.split()) == number


def test_submit_tmux_runs_the_script_detached(home_stack, sessions, submitted_script):
    _needs("tmux")
    marker = home_stack.workdir / "job-ran"
    script = submitted_script(
        home_stack.workdir,
        f"import sys\nopen({str(marker)!r}, 'w').write(' '.join(sys.argv[1:]))\n",
    )
    result = home_stack.invoke("submit", "--tmux", str(script), "--", "a", "b c")
    assert result.returncode == 0, result.stderr
    assert "Run `invoke attach --tmux` to check command status." in result.stdout
    wait_for(lambda: marker.exists() and marker.read_text() == "a b c", "the script ran")


def test_tmux_and_screen_together_are_one_line(stack):
    result = stack.invoke("exec", "--tmux", "--screen", "true")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "error: --tmux and --screen are alternatives: pick one" in result.stderr


def test_detached_exec_on_every_node_is_refused_in_one_line(stack):
    result = stack.invoke("exec", "--all-nodes", "--tmux", "true")
    assert result.returncode == 1
    assert "error: --tmux, --screen and --port-forward work on one node" in result.stderr


def test_exec_port_forward_holds_while_the_command_runs(stack, tmp_path):
    with http_server(b"served on the node") as node_port:
        _forward_while_running(stack, tmp_path, node_port)


def _forward_while_running(stack, tmp_path, node_port: int) -> None:
    local = free_port()
    gate = tmp_path / "gate"
    command = f"echo started; while [ ! -e {gate} ]; do sleep 0.05; done"
    process = subprocess.Popen(
        stack.spawn_args("exec", "--port-forward", f"{local}:{node_port}",
                         command),
        cwd=PROJECT_ROOT, env=stack.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().startswith(f"forwarding 127.0.0.1:{local} -> port")
        assert process.stdout.readline() == "started\n"
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(f"http://127.0.0.1:{local}/", timeout=30) as response:
            assert response.read() == b"served on the node"
        gate.touch()
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait()


def test_submit_args_is_split_like_rays(stack, tmp_path, submitted_script):
    script = submitted_script(tmp_path, "import sys\nprint('args', sys.argv[1:])\n")
    result = stack.invoke("submit", str(script), "--args", "--smoke-test --n 3")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "args ['--smoke-test', '--n', '3']\n"


def test_submit_args_with_dash_dash_args_is_one_line(stack, tmp_path, submitted_script):
    script = submitted_script(tmp_path, "print('never')\n")
    result = stack.invoke("submit", str(script), "--args", "x", "--", "y")
    assert result.returncode == 1 and "never" not in result.stdout
    assert "error: --args and `-- ARGS` are alternatives" in result.stderr


def test_attach_new_without_tmux_or_screen_is_one_line(stack):
    result = stack.invoke("attach", "--new")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "error: --new only makes sense with --tmux or --screen" in result.stderr


def test_attach_new_starts_a_session_of_its_own(home_stack, sessions):
    _needs("tmux")
    assert home_stack.invoke("exec", "--tmux", f"sleep {WAIT_SECONDS}").returncode == 0
    child = pexpect.spawn(
        sys.executable, ["-m", "invoke", "attach", "--tmux", "--new"], cwd=str(PROJECT_ROOT),
        env={**home_stack.env, "TERM": "xterm-256color"}, encoding="utf-8", timeout=30,
        dimensions=(40, 120),
    )
    try:
        child.sendline("tmux display-message -p 'in=#{session_name}' | tr a-z A-Z")
        child.expect(r"IN=(\S+)")
        assert child.match.group(1) != "RAY"  # not the shared `ray` session
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()


def test_rsync_up_all_nodes_sends_to_every_node(stack, tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.txt").write_text("to every node\n")
    target = tmp_path / "dst"
    result = stack.invoke("rsync-up", str(source), str(target), "--all-nodes")
    assert result.returncode == 0, result.stderr
    assert (target / "a.txt").read_text() == "to every node\n"
    assert "ray-local-worker-0001: " in result.stdout
    assert "rsync-up [" in result.stderr and "2/2 nodes" in result.stderr  # progress
