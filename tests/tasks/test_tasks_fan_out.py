"""`exec --all-nodes` and `rsync-up --all-nodes` to many nodes, as users type them: real
sshds answering at many loopback addresses (tests/support/sshd_fleet.py), the workers reached
through the head as a jump host, some of them refusing in each way a node can; and workers
Ray's autoscaler launched, which only the Compute API (the fake, tests/fakes/compute) lists."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.sshd_fleet import (
    HEAD,
    fleet_outputs,
    pin_fleet,
    sshd_fleet,
    worker_address,
    worker_name,
)
from tests.support.sshd_server import PROJECT_ROOT, keygen, pin_host_key
from tests.support.warm_python import run_module

WORKERS = 24
CLOSED = WORKERS  # a worker listed at an address no sshd listens on
BAD_KEY = 3  # a worker whose pinned host key is not the one its sshd offers
EXITS_3 = 7  # a worker where the command exits 3


@pytest.fixture(scope="module")
def fleet(sshd, tmp_path_factory: pytest.TempPathFactory):
    """The fleet's sshds (their kind is the `sshd` fixture's, which marks the tests)."""
    workdir = tmp_path_factory.mktemp("fleet")
    home = workdir / "home"
    home.mkdir()
    # `ray` on the sessions' PATH (no login shell) and an empty home: each node's shell
    # does no more work than a command needs, as on a node of its own.
    settings = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    with sshd_fleet(type(sshd), workdir, WORKERS, settings) as servers:
        yield workdir, servers


@pytest.fixture
def compute() -> Iterator[FakeComputeServer]:
    """The Compute API the fan-out lists the autoscaler's workers from (none unless seeded)."""
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


@pytest.fixture
def fleet_stack(fleet, compute: FakeComputeServer, tmp_path: Path) -> dict[str, str]:
    """Outputs listing the head, WORKERS workers and one more at a closed address, every
    host key pinned, BAD_KEY's wrongly (another key); the environment to run in."""
    _, servers = fleet
    outputs = fleet_outputs(servers, WORKERS + 1)
    state = tmp_path / "state"
    pin_fleet(state, "fleet", servers)
    # The closed one was reached before (its key pinned), its sshd is down now.
    pin_host_key(state, "fleet", servers[0], host=worker_address(CLOSED))
    known_hosts = state / "fleet" / "known_hosts"
    wrong = keygen(tmp_path / "other_host_key").with_suffix(".pub").read_text().split()
    bad = f"[{worker_address(BAD_KEY)}]:{servers[0].port} "
    known_hosts.write_text("".join(
        f"{bad}{wrong[0]} {wrong[1]}\n" if line.startswith(bad) else f"{line}\n"
        for line in known_hosts.read_text().splitlines()))
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    return {**os.environ, "RAY_GCP_STACK_OUTPUTS": str(tmp_path / "outputs.json"),
            "RAY_GCP_STATE_DIR": str(state), "PULUMI_STACK": "fleet",
            "RAY_GCP_SSH_PERSIST": "0", "RAY_GCP_API_ENDPOINT": compute.endpoint}


def invoke(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_module(["invoke", *args], cwd=PROJECT_ROOT, env=env, timeout=300)


def failure_lines(stderr: str, label: str) -> dict[str, str]:
    """{node: why} from the fan-out's `LABEL: NODE (IP) failed: WHY` lines."""
    return {match[1]: match[3] for match in
            re.finditer(rf"^{label}: (\S+) \((\S+)\) failed: (.*)$", stderr, re.MULTILINE)}


def test_exec_all_nodes_runs_on_every_node_and_says_each_failure_in_a_line(fleet_stack):
    exits_3 = worker_address(EXITS_3)
    result = invoke(fleet_stack, "exec", "--all-nodes",
                    f'case "$SSH_CONNECTION" in *" {exits_3} "*) exit 3;; esac; '
                    'echo "on ${SSH_CONNECTION% *}"')
    failed = failure_lines(result.stderr, "exec")
    assert set(failed) == {worker_name(CLOSED), worker_name(BAD_KEY), worker_name(EXITS_3)}
    assert failed[worker_name(EXITS_3)] == "exit 3"
    assert "does not match the one pinned" in failed[worker_name(BAD_KEY)]
    assert "could not reach worker" in failed[worker_name(CLOSED)]
    assert f"{worker_name(CLOSED)} ({worker_address(CLOSED)}) failed" in result.stderr
    # Every other node ran the command, its output prefixed with its name, whole lines.
    ran = {line.split("]")[0].strip("[ ") for line in result.stdout.splitlines()}
    assert len(ran) == WORKERS + 2 - 3 and worker_name(EXITS_3) not in ran
    for line in result.stdout.splitlines():
        name, said = re.fullmatch(r"\[(\S+) *\] on (.*)", line).groups()
        node = json.loads(Path(fleet_stack["RAY_GCP_STACK_OUTPUTS"]).read_text())["nodes"]
        assert said.endswith(" " + next(n["internal_ip"] for n in node if n["name"] == name))
    assert f"exec: {WORKERS + 2 - 3} ok, 3 failed, {WORKERS + 2} nodes in " in result.stderr
    assert result.returncode != 0 and "Traceback" not in result.stderr


def test_exec_all_nodes_writes_each_nodes_output_to_its_files(fleet_stack, tmp_path):
    out = tmp_path / "out"
    result = invoke(fleet_stack, "exec", "--all-nodes", "--out", str(out),
                    "echo to-out; echo to-err >&2")
    name = worker_name(0)
    assert (out / f"{name}.out").read_text() == "to-out\n"
    assert (out / f"{name}.err").read_text() == "to-err\n"
    assert "to-out" not in result.stdout
    assert result.returncode == 255  # the first failed node in the list could not be reached


def test_exec_all_nodes_works_on_at_most_parallel_nodes_at_once(fleet_stack, tmp_path):
    """Each node notes how many nodes are in the command at once while it runs there."""
    inside = tmp_path / "inside"
    inside.mkdir()
    seen = tmp_path / "seen"
    command = (f"touch {inside}/$$; sleep 1; ls {inside} | wc -l >> {seen}; "
               f"rm {inside}/$$")
    result = invoke(fleet_stack, "exec", "--all-nodes", "--parallel", "3", command)
    at_once = [int(line) for line in seen.read_text().split()]
    assert len(at_once) == WORKERS + 2 - 2  # the closed and the wrongly pinned never ran it
    assert max(at_once) <= 3 and max(at_once) > 1, at_once
    assert result.returncode == 255


def test_rsync_up_all_nodes_sends_to_the_nodes_it_reaches_and_names_the_others(
        fleet_stack, tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.txt").write_text("to every node\n")
    # Every node is this machine: they all write the same folder (GNU tar retries a file
    # another node made meanwhile), and the later ones find it there, unchanged.
    target = tmp_path / "dst"
    result = invoke(fleet_stack, "rsync-up", "--all-nodes", str(source), str(target))
    failed = failure_lines(result.stderr, "rsync-up")
    assert set(failed) == {worker_name(CLOSED), worker_name(BAD_KEY)}, result.stderr
    assert "host key is not the one pinned" in failed[worker_name(BAD_KEY)]
    assert (target / "a.txt").read_text() == "to every node\n"
    sent = {line.split(":")[0] for line in result.stdout.splitlines()}
    assert len(sent) == WORKERS + 2 - 2 and worker_name(EXITS_3) in sent
    assert f"rsync-up: {WORKERS + 2 - 2} ok, 2 failed, {WORKERS + 2} nodes in " in result.stderr
    assert result.returncode == 255 and "Traceback" not in result.stderr


def test_rsync_up_all_nodes_reaches_the_workers_through_one_connection_to_the_head(
        fleet, fleet_stack, tmp_path):
    """The head's sshd (which also serves the first workers' addresses) accepts one login
    for the head, the master every worker's `ssh -W` goes through, and one per worker it
    serves: none per worker for the jump."""
    _, servers = fleet
    head_sshd = servers[0]
    log = head_sshd.workdir / "sshd.log"
    before = log.read_text().count("Accepted publickey")
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.txt").write_text("x\n")
    result = invoke(fleet_stack, "rsync-up", "--all-nodes", str(source), str(tmp_path / "dst"))
    assert result.returncode == 255, result.stderr  # the closed and the wrongly pinned
    served = [address for address in head_sshd.addresses[1:]
              if address != worker_address(BAD_KEY)]
    assert log.read_text().count("Accepted publickey") - before == 1 + len(served)


PINNED = 3  # the stack's outputs list the head and the first PINNED workers
AUTOSCALED = (4, 5, 6)  # fleet workers only the Compute API lists (past BAD_KEY)
STOPPED = 8  # an autoscaler's worker the API lists TERMINATED


def autoscaler_worker(compute: FakeComputeServer, zone: str, name: str, address: str,
                      status: str = "RUNNING") -> None:
    """An instance labelled as Ray's autoscaler labels its workers (Ray's own tags), its
    first interface's internal address `address`."""
    from ray.autoscaler import tags

    project = "test-project"
    compute.cloud.add_foreign_instance(project, zone, name, {
        tags.TAG_RAY_CLUSTER_NAME: "local", tags.TAG_RAY_NODE_KIND: tags.NODE_KIND_WORKER,
        tags.TAG_RAY_USER_NODE_TYPE: "ray_worker_small",
        tags.TAG_RAY_NODE_STATUS: tags.STATUS_UP_TO_DATE})
    instance = compute.cloud.zone_instances(project, zone)[name]
    instance["networkInterfaces"][0]["networkIP"] = address
    instance["status"] = status


@pytest.fixture
def autoscaled_stack(fleet, compute: FakeComputeServer, fleet_stack: dict[str, str]
                     ) -> dict[str, str]:
    """The stack's outputs list the head and PINNED workers; the API lists AUTOSCALED (one in
    another zone), STOPPED (TERMINATED) and a pinned worker as the autoscaler's too."""
    _, servers = fleet
    Path(fleet_stack["RAY_GCP_STACK_OUTPUTS"]).write_text(json.dumps(
        fleet_outputs(servers, PINNED)))
    for index in AUTOSCALED:
        zone = "us-west1-b" if index == AUTOSCALED[-1] else "us-west1-a"
        autoscaler_worker(compute, zone, f"ray-local-worker-{index:08x}", worker_address(index))
    autoscaler_worker(compute, "us-west1-a", f"ray-local-worker-{STOPPED:08x}",
                      worker_address(STOPPED), "TERMINATED")
    autoscaler_worker(compute, "us-west1-a", worker_name(0), worker_address(0))
    return fleet_stack


def test_exec_all_nodes_reaches_the_autoscalers_running_workers_and_skips_the_stopped(
        autoscaled_stack):
    result = invoke(autoscaled_stack, "exec", "--all-nodes", 'echo "on ${SSH_CONNECTION% *}"')
    ran = {}
    for line in result.stdout.splitlines():
        name, said = re.fullmatch(r"\[(\S+) *\] on (.*)", line).groups()
        assert name not in ran, f"{name} ran twice"
        ran[name] = said.rsplit(" ", 1)[-1]
    autoscaled = {f"ray-local-worker-{index:08x}": worker_address(index) for index in AUTOSCALED}
    pinned = {worker_name(index): worker_address(index) for index in range(PINNED)}
    assert ran == {HEAD: "127.0.0.1", **pinned, **autoscaled}, result.stderr
    nodes = 1 + PINNED + len(AUTOSCALED)
    assert f"exec: {nodes} ok, 0 failed, {nodes} nodes in " in result.stderr
    assert result.stderr.rstrip().endswith("; 1 not running, skipped"), result.stderr
    assert result.returncode == 0


def test_rsync_up_all_nodes_sends_to_the_autoscalers_running_workers(autoscaled_stack,
                                                                     tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.txt").write_text("x\n")
    result = invoke(autoscaled_stack, "rsync-up", "--all-nodes", str(source),
                    str(tmp_path / "dst"))
    sent = {line.split(":")[0] for line in result.stdout.splitlines()}
    assert {f"ray-local-worker-{index:08x}" for index in AUTOSCALED} <= sent, result.stderr
    assert f"ray-local-worker-{STOPPED:08x}" not in sent
    nodes = 1 + PINNED + len(AUTOSCALED)
    assert len(sent) == nodes
    assert f"rsync-up: {nodes} ok, 0 failed, {nodes} nodes in " in result.stderr
    assert "; 1 not running, skipped" in result.stderr
    assert result.returncode == 0, result.stderr


def test_a_refused_listing_is_said_in_a_line_and_the_stacks_nodes_still_get_the_work(
        autoscaled_stack, compute):
    compute.faults.fail_next(403, methods={"aggregatedList"})
    result = invoke(autoscaled_stack, "exec", "--all-nodes", "true")
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("exec: listing")]
    assert line.startswith("exec: listing the autoscaler's workers failed: 403 "), line
    assert line.endswith(f"working on the stack's {1 + PINNED} nodes only")
    assert f"exec: {1 + PINNED} ok, 0 failed, {1 + PINNED} nodes in " in result.stderr
    assert "the autoscaler's workers not listed" in result.stderr
    assert result.returncode == 0 and "Traceback" not in result.stderr


def test_without_credentials_the_listing_is_refused_in_a_line_at_once(autoscaled_stack,
                                                                      tmp_path):
    env = {name: value for name, value in autoscaled_stack.items()
           if name not in {"RAY_GCP_API_ENDPOINT", "GOOGLE_APPLICATION_CREDENTIALS"}}
    result = invoke({**env, "CLOUDSDK_CONFIG": str(tmp_path)}, "exec", "--all-nodes", "true")
    assert ("exec: listing the autoscaler's workers: no credentials to ask the Compute API "
            "with (") in result.stderr
    assert f"exec: {1 + PINNED} ok, 0 failed, {1 + PINNED} nodes in " in result.stderr
    assert result.returncode == 0 and "Traceback" not in result.stderr
