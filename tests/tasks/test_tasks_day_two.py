"""The rest of `ray`'s cluster verbs over a real sshd: get-head-ip, get-worker-ips, dashboard,
monitor, cluster-dump, kill-random-node, and `status`'s script versions; each with its output,
its exit status, and one line (no traceback) when the stack has no outputs or a node is
unreachable."""

from __future__ import annotations

import io
import signal
import stat
import subprocess
import sys
import tarfile
import urllib.request

import pexpect
import pytest

from ops.cloud.bootstrap_status import bootstrap_table, read_nodes
from ops.cloud.cluster_dump import DumpParts, cluster_dump
from ops.remote.monitor import monitor
from ops.remote.ssh import Connector
from ops.stacks.stack import load_outputs
from ops.task_flags import SHORT_FLAGS
from tests.support.sshd_server import PROJECT_ROOT, free_port, stack_outputs_for

HEAD = "ray-local-head-0000"
WORKER = "ray-local-worker-0001"


def _run_task(*argv: str) -> int:
    """The task in this process (so a test can point a module constant elsewhere)."""
    from invoke import Collection, Program

    import tasks

    try:
        Program(namespace=Collection.from_module(tasks)).run(["invoke", *argv])
    except SystemExit as exited:
        return exited.code or 0
    return 0


def _one_line_error(result: subprocess.CompletedProcess[str], text: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and text in errors[0], result.stderr


# ---------------------------------------------------------------- get-head-ip / get-worker-ips


def test_get_head_ip_prints_the_external_ip_or_the_internal_one(stack, sshd):
    stack.write_outputs(stack_outputs_for(sshd, head_external_ip="203.0.113.5",
                                          head_internal_ip="10.0.0.2"))
    assert stack.invoke("get-head-ip").stdout == "203.0.113.5\n"
    assert stack.invoke("get-head-ip", "--internal").stdout == "10.0.0.2\n"


def test_get_worker_ips_prints_one_a_line(stack, sshd):
    outputs = stack_outputs_for(sshd)
    outputs["nodes"] += [{"name": "ray-local-worker-0002", "node_type": "ray_worker_small",
                          "kind": "worker", "internal_ip": "10.0.0.4",
                          "external_ip": "203.0.113.9", "status": "RUNNING"}]
    stack.write_outputs(outputs)
    result = stack.invoke("get-worker-ips")
    assert result.returncode == 0
    assert result.stdout == "127.0.0.1\n203.0.113.9\n"  # the first worker has no external IP
    assert stack.invoke("get-worker-ips", "--internal").stdout == "127.0.0.1\n10.0.0.4\n"


@pytest.mark.parametrize("task", ["get-head-ip", "get-worker-ips", "dashboard", "monitor",
                                  "cluster-dump", "kill-random-node"])
def test_a_stack_without_outputs_is_one_line(stack, tmp_path, task):
    empty = tmp_path / "outputs"
    empty.mkdir()
    result = stack.invoke(task, "--stack", "never-deployed",
                          env={**stack.env, "RAY_GCP_STACK_OUTPUTS": str(empty)})
    _one_line_error(result, "no such stack 'never-deployed'")


@pytest.mark.parametrize("args", [["dashboard"], ["monitor"], ["cluster-dump"],
                                  ["kill-random-node", "--yes"]])
def test_an_unreachable_head_is_one_line(stack, sshd, args):
    stack.write_outputs(stack_outputs_for(sshd, ssh_port=free_port()))  # nothing listens
    _one_line_error(stack.invoke(*args), "cannot reach the head")


# ---------------------------------------------------------------- dashboard


def test_dashboard_forwards_to_the_head_and_prints_the_url(stack, dashboard):
    process = subprocess.Popen(
        stack.spawn_args("dashboard", "--port", "0", "--remote-port", str(dashboard)),
        cwd=PROJECT_ROOT, env=stack.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        assert line.startswith("dashboard: http://127.0.0.1:"), process.stderr.read()
        url = line.split()[1]
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(url, timeout=30) as response:
            assert response.read() == b"dashboard says hi"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert process.stdout.read() == "stopped\n"
    finally:
        process.kill()
        process.wait()


RAY_TOKEN = "7a11" * 16


@pytest.mark.parametrize("show_token", [False, True])
def test_dashboard_of_a_token_auth_stack_says_where_the_token_is_and_shows_it_only_if_asked(
    stack, sshd, dashboard, show_token
):
    stack.write_outputs(stack_outputs_for(sshd, ray_auth_token=RAY_TOKEN))
    flags = ["--show-token"] if show_token else []
    process = subprocess.Popen(
        stack.spawn_args("dashboard", "--port", "0", "--remote-port", str(dashboard), *flags),
        cwd=PROJECT_ROOT, env=stack.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [process.stdout.readline() for _ in range(4 + show_token)]
        assert lines[0].startswith("dashboard: http://127.0.0.1:"), process.stderr.read()
        token_file = stack.state_dir / "test" / "ray_auth_token"
        assert token_file.read_text() == RAY_TOKEN
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        url = lines[0].split()[1]
        text = "".join(lines)
        assert str(token_file) in text
        assert (f"RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={token_file} ray job submit "
                f"--address {url}") in text
        assert (f"token: {RAY_TOKEN}\n" in text) is show_token
        assert text.count(RAY_TOKEN) == int(show_token)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert RAY_TOKEN not in process.stdout.read() + process.stderr.read()
    finally:
        process.kill()
        process.wait()


# ---------------------------------------------------------------- monitor


def test_monitor_shows_the_last_lines_of_the_autoscaler_logs(stack, tmp_path):
    logs = tmp_path / "session" / "logs"
    logs.mkdir(parents=True)
    (logs / "monitor.log").write_text("".join(f"update {i}\n" for i in range(10)))
    out = io.BytesIO()
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        status = monitor(connector, lines=2, logs=f"{logs}/monitor*", follow=False, out=out)
    assert status == 0
    assert out.getvalue() == b"update 8\nupdate 9\n"


def test_monitor_without_a_log_on_the_head_is_one_line(stack, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("ops.remote.monitor.MONITOR_LOGS", f"{tmp_path}/no-session/logs/monitor*")
    assert _run_task("monitor") == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the head has no autoscaler log") and "Traceback" not in err


# ---------------------------------------------------------------- cluster-dump


@pytest.fixture
def session(tmp_path):
    """A Ray session directory with logs and debug state, as the nodes would have."""
    logs = tmp_path / "session" / "logs"
    logs.mkdir(parents=True)
    (logs / "raylet.out").write_text("raylet started\n")
    (logs / "debug_state.txt").write_text("NodeManager: ok\n")
    bootstrap_log = tmp_path / "ray-bootstrap.log"
    bootstrap_log.write_text("stage=ready\n")
    return tmp_path / "session", bootstrap_log


def test_cluster_dump_collects_every_node_into_one_archive(stack, session, tmp_path):
    output = tmp_path / "dump.tar.gz"
    progress = io.StringIO()
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        written, failed = cluster_dump(connector, output, DumpParts(), str(session[0]),
                                       str(session[1]), err=progress)
    assert written == output and failed == []
    with tarfile.open(output) as archive:
        names = set(archive.getnames())
        assert archive.extractfile(f"{WORKER}/logs/raylet.out").read() == b"raylet started\n"
    for node in (HEAD, WORKER):
        assert {f"{node}/logs/debug_state.txt", f"{node}/processes.txt",
                f"{node}/pip_packages.txt", f"{node}/ray-bootstrap.log"} <= names
    assert "cluster-dump [" in progress.getvalue() and "2/2 nodes" in progress.getvalue()


def test_cluster_dump_without_logs_keeps_the_debug_state(stack, session, tmp_path):
    output = tmp_path / "dump.tar.gz"
    parts = DumpParts(logs=False, pip=False, processes=False)
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        cluster_dump(connector, output, parts, str(session[0]), str(session[1]),
                     err=io.StringIO())
    with tarfile.open(output) as archive:
        assert sorted(n for n in archive.getnames() if n.startswith(HEAD)) == [
            f"{HEAD}/debug_state.txt", f"{HEAD}/ray-bootstrap.log"]


def test_cluster_dump_task_names_an_unreachable_worker_and_writes_the_rest(stack, sshd,
                                                                           tmp_path):
    outputs = stack_outputs_for(sshd)
    outputs["nodes"][1]["internal_ip"] = "127.0.0.2"  # sshd listens on 127.0.0.1 only
    stack.write_outputs(outputs)
    output = tmp_path / "dump.tar.gz"
    result = stack.invoke("cluster-dump", "-o", str(output))
    assert result.returncode == 0, result.stderr
    assert f"warning: not in the archive: {WORKER}: the head could not reach" in result.stdout
    assert f"wrote {output}" in result.stdout
    assert "1/2 nodes" in result.stderr and "2/2 nodes" in result.stderr
    with tarfile.open(output) as archive:
        assert {name.split("/")[0] for name in archive.getnames()} == {HEAD}


# ---------------------------------------------------------------- kill-random-node


def test_kill_random_node_asks_first_and_stops_on_no(stack):
    child = pexpect.spawn(sys.executable, ["-m", "invoke", "kill-random-node"],
                          cwd=str(PROJECT_ROOT), env=stack.env, encoding="utf-8", timeout=120)
    child.expect_exact("A random node will be killed. Confirm [y/N]:")
    child.sendline("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert "error: aborted: nothing was killed" in child.before


def test_kill_random_node_without_a_terminal_or_yes_refuses_in_one_line(stack):
    result = subprocess.run(stack.spawn_args("kill-random-node"), cwd=PROJECT_ROOT,
                            env=stack.env, input="y\n", capture_output=True, text=True,
                            timeout=120)
    _one_line_error(result, "nothing killed: no terminal to ask on; add -y (--yes)")


def test_kill_random_node_with_yes_stops_ray_on_a_worker(stack, monkeypatch, capfd):
    # Stands in for `ray stop`, which would stop every Ray on this shared machine.
    monkeypatch.setattr("ops.cloud.kill_node.KILL_COMMAND", "echo ray-stop-ran-on-$(hostname)")
    assert _run_task("kill-random-node", "--yes") == 0
    out = capfd.readouterr().out
    assert f"Shutdown {WORKER}" in out and "ray-stop-ran-on-" in out
    assert out.rstrip().endswith("Killed node with IP 127.0.0.1")


def test_kill_random_node_hard_deletes_the_instance_through_the_api(stack, monkeypatch,
                                                                     capsys):
    from tests.fakes.compute import FakeComputeServer
    from tests.fakes.compute.helpers import compute_body

    with FakeComputeServer() as fake:
        fake.cloud.insert_instances("test-project", "us-west1-a", [WORKER, "bystander"],
                                    compute_body(), "bulkInsert", None)
        monkeypatch.setenv("RAY_GCP_API_ENDPOINT", fake.endpoint)
        assert _run_task("kill-random-node", "--yes", "--hard") == 0
        assert set(fake.instances("test-project", "us-west1-a")) == {"bystander"}
    out = capsys.readouterr().out
    assert f"Terminating {WORKER}" in out and "Killed node with IP 127.0.0.1" in out


def test_kill_random_node_hard_failure_is_one_line(stack, monkeypatch, capsys):
    from tests.fakes.compute import FakeComputeServer

    with FakeComputeServer() as fake:
        fake.faults.fail_next(403, methods={"delete"})  # the account may not delete
        monkeypatch.setenv("RAY_GCP_API_ENDPOINT", fake.endpoint)
        assert _run_task("kill-random-node", "--yes", "--hard") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: deleting {WORKER} failed") and "Traceback" not in err


def test_kill_random_node_without_workers_says_so(stack, sshd):
    outputs = stack_outputs_for(sshd)
    outputs["nodes"] = outputs["nodes"][:1]
    stack.write_outputs(outputs)
    result = stack.invoke("kill-random-node", "--yes")
    assert result.returncode == 0 and result.stdout == "No worker nodes detected.\n"


# ---------------------------------------------------------------- status: script versions


def _nodes_at_version_1(stack, sshd, tmp_path, status: str):
    """Outputs wanting version 1111aaaa on the head and 2222bbbb on the workers, and the guest
    attributes every node (all the same sshd) reports: version 1111aaaa at `status`."""
    stack.write_outputs(stack_outputs_for(sshd, script_versions={
        "head": "1111aaaa", "ray_worker_small": "2222bbbb"}))
    attributes = tmp_path / "attributes"
    attributes.mkdir()
    (attributes / "version").write_text("1111aaaa")
    (attributes / "status").write_text(status)
    return attributes


def test_status_shows_each_nodes_version_and_a_failed_stage_with_its_log_tail(stack, sshd,
                                                                              tmp_path):
    attributes = _nodes_at_version_1(stack, sshd, tmp_path, "failed:setup:9")
    log = tmp_path / "bootstrap.log"
    log.write_text("".join(f"line {i}\n" for i in range(40)) + "stage=setup failed exit=9\n")
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        reports = read_nodes(connector, attributes_dir=str(attributes), log_file=str(log))
    table = bootstrap_table(reports).splitlines()
    assert table[0].split() == ["NAME", "APPLIED", "WANTED", "BOOTSTRAP"]
    assert table[1].split() == [HEAD, "1111aaaa", "1111aaaa", "failed:setup:9"]
    assert table[2].split() == [WORKER, "1111aaaa", "2222bbbb", "failed:setup:9"]
    assert f"{WORKER}: failed:setup:9; last lines of its bootstrap log:" in table
    assert "stage=setup failed exit=9" in table and "line 5" not in table


def test_status_says_a_node_is_converging_until_it_reports_the_wanted_version(stack, sshd,
                                                                                tmp_path):
    attributes = _nodes_at_version_1(stack, sshd, tmp_path, "running:setup")
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        states = {r.name: r.state for r in read_nodes(connector, attributes_dir=str(attributes))}
    assert states == {HEAD: "running:setup", WORKER: "converging (running:setup)"}


# ---------------------------------------------------------------- flags


NEW_TASKS = ["dashboard", "get_head_ip", "get_worker_ips", "monitor", "cluster_dump",
             "kill_random_node"]
NEW_FLAGS = {"up": {"restart_only", "no_restart"}, "down": {"workers_only", "keep_min_workers"},
             "attach": {"new"}, "exec_": {"tmux", "screen", "port_forward"},
             "submit": {"tmux", "screen", "port_forward", "args"}, "rsync_up": {"all_nodes"}}
# The only short letters of the flags above, each meaning one thing in every task.
SHORT = {letter: name.replace("_", "-") for name, letter in SHORT_FLAGS.items()}


def test_new_flags_use_rays_long_names_and_no_letter_means_two_things():
    import tasks

    flags = [(name, argument) for name in NEW_TASKS
             for argument in getattr(tasks, name).get_arguments()]
    flags += [(name, argument) for name, added in NEW_FLAGS.items()
              for argument in getattr(tasks, name).get_arguments()
              if argument.attr_name in added]
    for task_name, argument in flags:
        long_name, *short = argument.names
        assert all(SHORT.get(letter) == long_name for letter in short), (task_name, long_name)
    assert {argument.names[0] for name, argument in flags if name == "kill_random_node"} == {
        "stack", "config", "yes", "hard", "trust-first-use"}


def test_list_shows_every_new_task_with_help_and_a_stack_flag(stack):
    listing = stack.invoke("--list").stdout
    for name in ("dashboard", "get-head-ip", "get-worker-ips", "monitor", "cluster-dump",
                 "kill-random-node"):
        line = next(line for line in listing.splitlines() if line.strip().startswith(name + " "))
        assert len(line.split(maxsplit=1)) == 2, f"{name} has no help"
        assert "-s STRING, --stack=STRING" in stack.invoke("--help", name).stdout


def test_status_reads_where_nodes_write_and_stays_light():
    from bootstrap.node_metadata import LOG_FILE, STATE_DIR, VERSION_GUEST_ATTRIBUTE
    from ops.cloud.bootstrap_status import ATTRIBUTES_DIR
    from ops.cloud.status import BOOTSTRAP_LOG

    assert f"{ATTRIBUTES_DIR}/version" == f"{STATE_DIR}/guest-attributes/{VERSION_GUEST_ATTRIBUTE}"
    assert BOOTSTRAP_LOG == LOG_FILE
    imported = subprocess.run(
        [sys.executable, "-c", "import sys, ops.cloud.bootstrap_status, ops.cloud.cluster_dump; "
         "print('model.config' in sys.modules)"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert imported.stdout == "False\n"


def test_status_names_an_unreachable_worker_in_its_row(stack, sshd, tmp_path):
    outputs = stack_outputs_for(sshd)
    outputs["nodes"][1]["internal_ip"] = "127.0.0.2"  # sshd listens on 127.0.0.1 only
    stack.write_outputs(outputs)
    with Connector(load_outputs(), announce=io.StringIO()) as connector:
        reports = read_nodes(connector, attributes_dir=str(tmp_path / "none"))
    states = {report.name: report.state for report in reports}
    assert states[HEAD] == "no status yet"
    assert states[WORKER].startswith("unreachable: the head could not reach worker")
