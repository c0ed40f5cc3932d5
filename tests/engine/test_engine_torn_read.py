"""A task that reads a stack's state on the file backend while another run writes it reads it
again, saying so, instead of failing: the file backend rewrites each state file's `.attrs`
sidecar in place, so such a reader can meet it empty, and the pinned CLI then says "failed to
load checkpoint: EOF" (seen in `test_engine_killed_half_way.py`'s two first ups). Here the
sidecar is left empty, as a writer leaves it mid-write, until the task says it reads again."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ops.stacks.torn_read import SAID
from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import PROJECT_ROOT, EngineWorkspace

# Writes a stack file into the checkout's stacks/: with the other such tests, on one worker.
pytestmark = pytest.mark.xdist_group("checkout-stacks")

STACK = "engine-torn-read"
AGAIN = SAID


def torn_task(space: EngineWorkspace, state: Path, args: list[str], said_on: str,
              env: dict[str, str] | None = None) -> tuple[int, list[str], str]:
    """`invoke ARGS` on the stack, started while its state's `.attrs` sidecar is empty, as a
    writer leaves it mid-write; the sidecar written back when the task says, on `said_on`
    (stdout or stderr), that it reads again. Its exit code, the lines it said there, and the
    other stream."""
    (sidecar,) = (state / ".pulumi" / "stacks").glob(f"*/{STACK}.json.attrs")
    kept = sidecar.read_bytes()
    sidecar.write_bytes(b"")
    task = subprocess.Popen([sys.executable, "-m", "invoke", *args, "-s", STACK],
                            cwd=PROJECT_ROOT, env={**os.environ, **space.env, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched, other = (task.stdout, task.stderr) if said_on == "stdout" else (task.stderr,
                                                                           task.stdout)
    assert watched is not None and other is not None
    said: list[str] = []

    def watch() -> None:
        for line in watched:
            said.append(line)
            if line.strip() == AGAIN:
                sidecar.write_bytes(kept)  # the writer finished

    watcher = threading.Thread(target=watch)
    watcher.start()
    rest = other.read()
    task.wait(timeout=600)
    watcher.join()
    return task.returncode, said, rest


def test_a_state_read_meeting_a_write_in_progress_is_read_again(engine_bin, tmp_path) -> None:
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, engine_bin, root=tmp_path)
        with space.repo_stack(STACK, {"ray-gcp:cluster": "stacks/clusters/minimal.yaml"}):
            code, said, errors = torn_task(space, tmp_path / "state", ["refresh"], "stdout")
    assert code == 0, "".join(said)[-3000:] + errors[-3000:]
    assert [line.strip() for line in said].count(AGAIN) == 1, said
    assert "summary: " in "".join(said)


def test_a_tasks_read_of_the_outputs_meeting_a_write_in_progress_is_read_again(
        engine_bin, tmp_path) -> None:
    """A day-two task's read of the outputs (`pulumi stack output`, no keeper) meets the state
    mid-write: it says so on stderr (stdout may be a script's JSON) and reads again, here to
    find a stack nothing deployed yet."""
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, engine_bin, root=tmp_path)
        with space.repo_stack(STACK, {"ray-gcp:cluster": "stacks/clusters/minimal.yaml"}):
            code, said, printed = torn_task(space, tmp_path / "state", ["get-head-ip"],
                                            "stderr", env={"RAY_GCP_SSH_PERSIST": "0"})
    assert [line.strip() for line in said].count(AGAIN) == 1, said
    assert AGAIN not in printed
    # read through: the stack has no outputs yet, and the task says so in one line
    assert code != 0 and "deploy it first" in said[-1], said
