"""`invoke exec` and `invoke submit` as users type them, against a real sshd."""

from __future__ import annotations

import subprocess

from sshd_server import PROJECT_ROOT

pytest_plugins = ["sshd_fixture"]  # the sshd and stack fixtures


def test_exec_exits_with_remote_status_and_splits_streams(stack):
    result = stack.invoke("exec", "echo to-out; echo to-err >&2; exit 7")
    assert result.returncode == 7
    assert result.stdout == "to-out\n"
    assert "to-err" in result.stderr and "to-out" not in result.stderr


def test_exec_streams_output_before_the_command_ends(stack, tmp_path):
    # The command prints, then blocks until the test creates a file it waits for: the first
    # line can only be read here if it was streamed while the command was still running.
    gate = tmp_path / "gate"
    command = f"echo started; while [ ! -e {gate} ]; do sleep 0.05; done; echo finished"
    process = subprocess.Popen(
        stack.spawn_args("exec", command), cwd=PROJECT_ROOT, env=stack.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout.readline() == "started\n"
        assert process.poll() is None
        gate.touch()
        assert process.stdout.readline() == "finished\n"
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait()


def test_exec_all_prefixes_each_node_and_fails_if_any_fails(stack):
    result = stack.invoke("exec", "--all", "echo hello; echo oops >&2; exit 3")
    assert result.returncode == 3
    lines = sorted(result.stdout.splitlines())
    assert lines == ["[ray-local-head-0000  ] hello", "[ray-local-worker-0001] hello"]
    assert "[ray-local-worker-0001] oops" in result.stderr


def test_exec_on_named_worker_runs_through_head(stack):
    result = stack.invoke("exec", "--node", "ray-local-worker-0001", "echo $SSH_CONNECTION")
    assert result.returncode == 0 and result.stdout.strip()


def test_exec_docker_without_container_says_so(stack):
    result = stack.invoke("exec", "--docker", "true")
    assert result.returncode == 1
    assert "runs without docker" in result.stderr and "Traceback" not in result.stderr


def test_unknown_node_lists_the_nodes(stack):
    result = stack.invoke("exec", "--node", "nope", "true")
    assert result.returncode == 1 and "ray-local-worker-0001" in result.stderr


def test_submit_uploads_script_and_runs_it_with_args(stack, tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import sys\nprint('args', sys.argv[1:])\nsys.exit(int(sys.argv[2]))\n")
    result = stack.invoke("submit", str(script), "--", "--flag", "5")
    assert result.returncode == 5
    assert result.stdout == "args ['--flag', '5']\n"


def test_docker_commands_run_inside_the_container():
    from ops.remote import in_container

    wrapped = in_container("ray status", "ray_container")
    assert wrapped == "docker exec ray_container /bin/bash -lc 'ray status'"
