"""`invoke exec` and `invoke submit` as users type them, against a real sshd."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.sshd_server import PROJECT_ROOT


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
    result = stack.invoke("exec", "--all-nodes", "echo hello; echo oops >&2; exit 3")
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


def test_submit_uploads_script_and_runs_it_with_args(stack, tmp_path, submitted_script):
    script = submitted_script(
        tmp_path, "import sys\nprint('args', sys.argv[1:])\nsys.exit(int(sys.argv[2]))\n"
    )
    result = stack.invoke("submit", str(script), "--", "--flag", "5")
    assert result.returncode == 5
    assert result.stdout == "args ['--flag', '5']\n"


def test_docker_commands_run_inside_the_container():
    from ops.remote.commands import in_container

    wrapped = in_container("ray status", "ray_container")
    assert wrapped == "docker exec ray_container /bin/bash -lc 'ray status'"


def test_submit_passes_arguments_with_spaces_and_quotes_unchanged(stack, tmp_path,
                                                                 submitted_script):
    script = submitted_script(tmp_path, "import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    args = ["--name", "a b", "x y", "it's \"quoted\"", "$HOME", "*", ""]
    result = stack.invoke("submit", str(script), "--", *args)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == args


def test_remainder_falls_back_to_shell_words_when_argv_does_not_match():
    from ops.remote.commands import remainder_argv

    assert remainder_argv("--name a b", ["invoke", "submit", "s.py", "--", "--name", "a b"]) == [
        "--name", "a b",
    ]
    # called with a remainder that is not this process's command line: shell-split it
    assert remainder_argv("--name 'a b'", ["pytest"]) == ["--name", "a b"]
    assert remainder_argv("", ["invoke", "submit", "s.py"]) == []


def write_executable(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def test_exec_finds_ray_that_only_the_login_profile_puts_on_path(home_stack):
    home = home_stack.workdir / "home"
    write_executable(home / "bin" / "ray", "#!/bin/sh\necho ray from profile \"$@\"\n")
    (home / ".profile").write_text('PATH="$HOME/bin:$PATH"\n')
    result = home_stack.invoke("exec", "ray status")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ray from profile status\n"


def test_exec_reads_the_login_profile_only_when_ray_needs_it_or_when_asked(home_stack):
    home = home_stack.workdir / "home"
    write_executable(home / "fastbin" / "ray", "#!/bin/sh\necho ray on path\n")
    (home / ".profile").write_text("export FROM_PROFILE=yes\n")
    command = 'echo "profile=${FROM_PROFILE:-no} shell=$0"; ray'
    plain = home_stack.invoke("exec", command)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "profile=no shell=bash\nray on path\n"
    login = home_stack.invoke("exec", "--login", 'echo "profile=${FROM_PROFILE:-no}"')
    assert login.returncode == 0, login.stderr
    assert login.stdout == "profile=yes\n"


def test_exec_keeps_status_and_quoting_through_the_shell_wrapper(home_stack):
    command = """printf '%s|' "a  b" 'it'"'"'s' "$((2+2))"; exit 9"""
    for ray_on_path in (False, True):
        if ray_on_path:
            write_executable(home_stack.workdir / "home" / "fastbin" / "ray", "#!/bin/sh\n")
        result = home_stack.invoke("exec", command)
        assert result.returncode == 9
        assert result.stdout == "a  b|it's|4|"


def test_exec_does_not_import_pulumi_pydantic_or_google(stack):
    # these take longer to import than the whole ssh round trip; exec needs none of them
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "invoke", "exec", "true"],
        cwd=PROJECT_ROOT, env=stack.env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert "paramiko" in imported  # the probe sees exec's imports
    # Every task checks its stack file through model.stack_config, which stays light.
    light = {"model", "model.stack_config", "model.yaml_text", "model.private_files",
             "model.quick_exit"}
    heavy_roots = {"pulumi", "pulumi_gcp", "pydantic", "google", "infra", "model"}
    heavy = sorted(name for name in imported - light if name.split(".")[0] in heavy_roots)
    assert heavy == []
    assert "ops.remote.fanout" not in imported  # one node is no fan-out
