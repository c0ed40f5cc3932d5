"""Day-two tasks on an unchanged stack read its outputs from the outputs keeper, with no pulumi
CLI run, and never stale ones: checked with the real engine, whose file backend writes the
checkpoint the keeper's key is read from (ops.stacks.checkpoint), and `invoke get-head-ip` run as a
user runs it. The CLI the tasks run is the engine behind a wrapper that logs each run.

The stack is made by a small program of outputs alone (the shapes ops.stacks.stack reads) in the
workspace's project, which shares the stack with this project (the diy backend files stacks
by project name). Every keeper a test starts is stopped by the test."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ops.stacks.checkpoint import checkpoint_files, state_identity
from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import ENGINE_VERSION, PROJECT_ROOT, EngineWorkspace
from tests.support.other_user import answered_as_nobody
from tests.support.waiting import wait_for

STACK = "kept-outputs"
PROJECT = "ray-gcp"
PROGRAM = """\
import json
from pathlib import Path

import pulumi

SECRETS = ("ssh_private_key", "ray_auth_token")
values = json.loads((Path(__file__).parent / "values.json").read_text())
for name, value in values.items():
    pulumi.export(name, pulumi.Output.secret(value) if name in SECRETS else value)
"""


@dataclass
class OutputsStack:
    space: EngineWorkspace
    program: Path
    state_dir: Path
    backend: Path
    cli_log: Path
    secret: str

    def deploy(self, head_ip: str) -> None:
        """`pulumi up` of the outputs program with the head at `head_ip`."""
        values = {"cluster_name": "kept", "head_name": "ray-kept-head",
                  "head_internal_ip": "10.0.0.2", "head_external_ip": head_ip,
                  "ssh_user": "ubuntu", "ssh_private_key": self.secret,
                  "ray_auth_token": f"token-{self.secret}"}
        values_file = self.program.parent / "values.json"
        values_file.write_text(json.dumps(values))
        try:
            self.space.run(STACK, "up", self.program)
        finally:
            values_file.unlink()  # the only clear copy, ours: gone before anything is scanned

    def head_ip(self) -> str:
        done = self.space.invoke("get-head-ip", "-s", STACK)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip()

    def cli_runs(self) -> int:
        return len(self.cli_log.read_text().splitlines()) if self.cli_log.exists() else 0

    @property
    def keeper_socket(self) -> Path:
        return self.state_dir / ".outputs-keeper" / "keeper.sock"

    def keeper_answers(self) -> bool:
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(short(self.keeper_socket))
            except OSError:
                return False
        return True

    def keeper_pid(self) -> int:
        with socket.socket(socket.AF_UNIX) as probe:
            probe.connect(short(self.keeper_socket))
            credentials = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                           struct.calcsize("3i"))
        return struct.unpack("3i", credentials)[0]


def short(path: Path) -> str:
    """`path` through its folder's descriptor: a unix socket path holds 108 bytes."""
    return f"/proc/{os.getpid()}/fd/{os.open(path.parent, os.O_RDONLY)}/{path.name}"


def logging_cli(cache: Path, real_bin: Path, log: Path) -> None:
    """The engine as `invoke engine` installs it under `cache`, behind a script that logs each
    run's first two arguments (never the output) and then runs the real CLI."""
    bin_dir = cache / "ray-gcp-pulumi" / "engine" / ENGINE_VERSION / "bin"
    bin_dir.mkdir(parents=True)
    wrapper = bin_dir / "pulumi"
    wrapper.write_text(f'#!/bin/sh\necho "$1 $2" >> "{log}"\nexec "{real_bin}/pulumi" "$@"\n')
    wrapper.chmod(0o755)


@pytest.fixture
def outputs_stack(engine_bin: Path, tmp_path: Path,
                  request: pytest.FixtureRequest) -> Iterator[OutputsStack]:
    """An outputs-only stack in a file backend, tasks with the keeper on (60 s) and the
    logging CLI; a parameter (indirect) adds to the workspace's environment."""
    bin_dir = engine_bin
    state_dir, cache, log = tmp_path / "state-dir", tmp_path / "cache", tmp_path / "cli.log"
    logging_cli(cache, bin_dir, log)
    program = tmp_path / "program" / "__main__.py"
    program.parent.mkdir()
    program.write_text(PROGRAM)
    env = {"RAY_GCP_STATE_DIR": str(state_dir), "RAY_GCP_SSH_PERSIST": "60",
           "XDG_CACHE_HOME": str(cache), **getattr(request, "param", {})}
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir, root=tmp_path / "engine", extra_env=env)
        kept = OutputsStack(space, program, state_dir, space.root / "state", log,
                            f"-----BEGIN OPENSSH PRIVATE KEY-----\nkept-{uuid.uuid4().hex}\n"
                            "-----END OPENSSH PRIVATE KEY-----\n")
        try:
            yield kept
        finally:
            if kept.keeper_socket.exists() and kept.keeper_answers():
                with contextlib.suppress(OSError):
                    os.kill(kept.keeper_pid(), signal.SIGKILL)
                wait_for(lambda: not kept.keeper_answers(), "the test's keeper to end")


def files_holding(folder: Path, text: str) -> list[Path]:
    return [path for path in folder.rglob("*")
            if path.is_file() and not path.is_socket() and text.encode() in path.read_bytes()]


def test_a_second_task_on_an_unchanged_stack_runs_no_cli(outputs_stack):
    kept = outputs_stack
    kept.deploy("203.0.113.7")

    assert kept.head_ip() == "203.0.113.7"
    assert kept.cli_runs() == 1
    wait_for(kept.keeper_answers, "the outputs keeper listening")
    for _ in range(2):
        assert kept.head_ip() == "203.0.113.7"
    assert kept.cli_runs() == 1, kept.cli_log.read_text()

    assert stat.S_IMODE(kept.keeper_socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.keeper_socket.parent.stat().st_mode) == 0o700
    marker = kept.secret.splitlines()[1]
    assert files_holding(kept.state_dir, marker) == []
    assert files_holding(kept.space.root, marker) == []  # backend, PULUMI_HOME: ciphertext only
    assert files_holding(kept.cli_log.parent / "cache", marker) == []


def test_after_an_up_changes_an_output_the_next_task_sees_it(outputs_stack):
    kept = outputs_stack
    kept.deploy("203.0.113.7")
    assert kept.head_ip() == "203.0.113.7"
    wait_for(kept.keeper_answers, "the outputs keeper listening")

    kept.deploy("198.51.100.9")
    assert kept.head_ip() == "198.51.100.9"
    assert kept.cli_runs() == 2
    assert kept.head_ip() == "198.51.100.9"  # kept again: no third run
    assert kept.cli_runs() == 2


def test_a_killed_keeper_falls_back_to_the_cli(outputs_stack):
    kept = outputs_stack
    kept.deploy("203.0.113.7")
    assert kept.head_ip() == "203.0.113.7"
    wait_for(kept.keeper_answers, "the outputs keeper listening")

    os.kill(kept.keeper_pid(), signal.SIGKILL)
    wait_for(lambda: not kept.keeper_answers(), "the keeper to die")
    assert kept.keeper_socket.exists()  # a dead keeper's socket is left behind
    assert kept.head_ip() == "203.0.113.7"
    assert kept.cli_runs() == 2
    wait_for(kept.keeper_answers, "a new keeper listening")  # started anew, over the old socket
    assert kept.head_ip() == "203.0.113.7"
    assert kept.cli_runs() == 2


@pytest.mark.parametrize("outputs_stack", [{"RAY_GCP_SSH_PERSIST": "0"}], indirect=True)
def test_without_persistence_no_keeper_is_started(outputs_stack):
    kept = outputs_stack
    kept.deploy("203.0.113.7")
    for _ in range(2):
        assert kept.head_ip() == "203.0.113.7"
    assert kept.cli_runs() == 2
    assert not (kept.state_dir / ".outputs-keeper").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_the_keeper_answers_no_other_user_even_through_an_open_socket(outputs_stack):
    """Past the 0600 mode (opened up here), SO_PEERCRED still turns another uid away: even a
    stop goes unanswered and unheeded."""
    kept = outputs_stack
    kept.deploy("203.0.113.7")
    assert kept.head_ip() == "203.0.113.7"
    wait_for(kept.keeper_answers, "the outputs keeper listening")
    assert not answered_as_nobody(kept.keeper_socket, b'{"stop": true}\n'), \
        "another user was answered"
    assert kept.head_ip() == "203.0.113.7"  # the owner still is, from the keeper
    assert kept.cli_runs() == 1


def pulumi(kept: OutputsStack, *args: str) -> None:
    subprocess.run([str(Path(kept.space.env["ENGINE_ROOT"]) / "bin" / "pulumi"), *args,
                    "--cwd", str(kept.space.project)],
                   env={**os.environ, **kept.space.env}, check=True, capture_output=True,
                   timeout=300)


def test_the_engine_writes_the_checkpoint_the_key_is_read_from(outputs_stack):
    """Project layout, `<stack>.json` under `.pulumi/stacks/<project>/`: every operation that
    writes it changes the identity, `stack rm` ends it (leaving only the `.bak` copy)."""
    kept = outputs_stack
    url = kept.space.env["PULUMI_BACKEND_URL"]
    kept.deploy("203.0.113.7")
    plain, compressed, zstd = checkpoint_files(kept.backend, PROJECT, STACK)
    assert plain == kept.backend / ".pulumi" / "stacks" / PROJECT / f"{STACK}.json"
    assert not compressed.exists() and not zstd.exists()
    latest = json.loads(plain.read_text())["checkpoint"]["latest"]
    (root,) = [r for r in latest["resources"] if r["type"] == "pulumi:pulumi:Stack"]
    assert root["outputs"]["head_external_ip"] == "203.0.113.7"
    assert kept.secret not in plain.read_text()  # a secret output: ciphertext
    seen = [state_identity(url, PROJECT, STACK, PROJECT_ROOT)]

    kept.space.run(STACK, "refresh", kept.program)
    seen.append(state_identity(url, PROJECT, STACK, PROJECT_ROOT))
    assert plain.with_name(plain.name + ".bak").is_file()
    kept.space.run(STACK, "destroy", kept.program)
    seen.append(state_identity(url, PROJECT, STACK, PROJECT_ROOT))
    assert None not in seen and len(set(seen)) == 3, seen

    pulumi(kept, "stack", "rm", "--yes", "--stack", STACK)
    assert not plain.exists() and plain.with_name(plain.name + ".bak").is_file()
    assert state_identity(url, PROJECT, STACK, PROJECT_ROOT) is None


@pytest.mark.parametrize("outputs_stack", [{"PULUMI_DIY_BACKEND_GZIP": "true"}],
                         indirect=True)
def test_with_gzip_on_the_checkpoint_is_json_gz_and_turning_it_off_moves_the_key(
        outputs_stack):
    kept = outputs_stack
    url = kept.space.env["PULUMI_BACKEND_URL"]
    kept.deploy("203.0.113.7")
    plain, compressed, _ = checkpoint_files(kept.backend, PROJECT, STACK)
    assert compressed.is_file() and not plain.exists()
    latest = json.loads(gzip.decompress(compressed.read_bytes()))["checkpoint"]["latest"]
    assert any(r["outputs"].get("head_external_ip") == "203.0.113.7"
               for r in latest["resources"])
    assert kept.head_ip() == "203.0.113.7"
    wait_for(kept.keeper_answers, "the outputs keeper listening")
    before = state_identity(url, PROJECT, STACK, PROJECT_ROOT)

    del kept.space.env["PULUMI_DIY_BACKEND_GZIP"]
    (kept.space.root / "env.json").write_text(json.dumps(kept.space.env))
    kept.deploy("198.51.100.9")
    assert plain.is_file() and not compressed.exists()
    assert state_identity(url, PROJECT, STACK, PROJECT_ROOT) not in (None, before)
    assert kept.head_ip() == "198.51.100.9"
    assert kept.cli_runs() == 2


def test_a_legacy_layout_is_left_to_the_cli(outputs_stack):
    """`.pulumi/stacks/<stack>.json` with no meta.yaml is the legacy layout, which this engine
    refuses: no identity is read from it and nothing is kept, the CLI says what it says."""
    kept = outputs_stack
    url = kept.space.env["PULUMI_BACKEND_URL"]
    kept.deploy("203.0.113.7")
    plain = checkpoint_files(kept.backend, PROJECT, STACK)[0]
    plain.rename(kept.backend / ".pulumi" / "stacks" / f"{STACK}.json")
    (kept.backend / ".pulumi" / "meta.yaml").unlink()

    assert state_identity(url, PROJECT, STACK, PROJECT_ROOT) is None
    done = kept.space.invoke("get-head-ip", "-s", STACK)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert kept.cli_runs() == 1
    assert not (kept.state_dir / ".outputs-keeper").exists()
