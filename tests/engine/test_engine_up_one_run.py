"""`invoke up` refreshes and updates in one engine run (`pulumi up --refresh --run-program`):
the engine, its plugins and the stack's state are loaded once, and the refresh still brings
back what the cloud lost. Counted, not timed: every pulumi CLI run and every start of the
dynamic providers' plugin is logged by wrappers around the pinned engine. None of those
processes, nor `invoke status`, imports google-cloud-compute (tests/support/import_watch)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import ENGINE_VERSION, EngineWorkspace, cluster_nodes
from tests.support.import_watch import watch_env, watched_imports

# Writes the checkout's stacks/ folder (EngineWorkspace.repo_stack): one worker runs every such
# test (tests/conftest.py's groups).
pytestmark = [pytest.mark.xdist_group("checkout-stacks"), pytest.mark.slow]

STACK = "engine-up-one-run"
PROJECT, ZONE, CLUSTER, WORKER = "my-gcp-project", "us-west1-a", "full", "ray_worker_small"
DYNAMIC_PLUGIN = "pulumi-resource-pulumi-python"
LOGGED = """#!/bin/sh
echo "{name} $*" >> {log}
exec {real} "$@"
"""


@dataclass
class Logged:
    space: EngineWorkspace
    fake: FakeComputeServer
    log: Path
    imports: Path
    """Every process of the tasks and the engine that imported google.cloud.compute_v1."""

    def up(self) -> list[str]:
        """`invoke up` as a user runs it; the CLI runs and plugin starts it made."""
        self.log.write_text("")
        done = self.space.invoke("up", "-s", STACK)
        assert done.returncode == 0, f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
        return self.log.read_text().splitlines()

    def workers(self) -> list[str]:
        return sorted(name for name, node in cluster_nodes(self.fake, PROJECT, ZONE,
                                                           CLUSTER).items()
                      if node["labels"].get("ray-user-node-type") == WORKER)


@pytest.fixture
def logged(engine_bin: Path, tmp_path: Path) -> Iterator[Logged]:
    """The pinned engine behind wrappers that log each run: the tasks find it as `invoke
    engine` installs it (XDG_CACHE_HOME), and the Automation API puts its folder first on the
    PATH the engine looks for the dynamic providers' plugin on."""
    log = tmp_path / "runs.log"
    root = tmp_path / "cache" / "ray-gcp-pulumi" / "engine" / ENGINE_VERSION
    (root / "bin").mkdir(parents=True)
    for name in ("pulumi", DYNAMIC_PLUGIN):
        wrapper = root / "bin" / name
        wrapper.write_text(LOGGED.format(name=name, log=log, real=engine_bin / name))
        wrapper.chmod(0o755)
    imports = tmp_path / "imports.log"
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, engine_bin, root=tmp_path / "engine", extra_env={
            "XDG_CACHE_HOME": str(tmp_path / "cache"), "ENGINE_ROOT": str(root),
            "RAY_GCP_STATE_DIR": str(tmp_path / "state"), **watch_env(imports)})
        with space.repo_stack(STACK, {"ray-gcp:cluster": f"stacks/clusters/{CLUSTER}.yaml"}):
            yield Logged(space, fake, log, imports)


def engine_runs(runs: list[str]) -> list[str]:
    """The CLI runs that load the engine and plugins: up, refresh, preview, destroy."""
    return [line for line in runs
            if line.split()[1:2] == ["--non-interactive"]
            and line.split()[2] in ("up", "refresh", "preview", "destroy")]


def test_invoke_up_refreshes_and_updates_in_one_engine_run(logged: Logged) -> None:
    logged.up()
    (gone,) = logged.workers()
    logged.fake.cloud.preempt(PROJECT, ZONE, gone)  # GCE deleted the worker

    runs = logged.up()

    (run,) = engine_runs(runs)
    assert run.split()[2] == "up" and "--refresh" in run.split(), run
    assert len([line for line in runs if line.startswith(DYNAMIC_PLUGIN)]) == 1, runs
    # The refresh in that run lowered the group's count, and its update made the worker again.
    assert len(logged.workers()) == 1 and gone not in logged.workers()

    again = logged.up()  # nothing changed: still one run, one plugin start
    assert len(engine_runs(again)) == 1, again
    assert len([line for line in again if line.startswith(DYNAMIC_PLUGIN)]) == 1, again
    # The outputs are read once with their secrets, by the Automation API at the up's end;
    # the up's summary and the next task take those, not a read of their own.
    assert len([line for line in again if "stack output" in line and "--show-secrets" in line
                ]) == 1, again

    # Compute is called over REST (infra/workers/compute_rest.py): no process of the ups, nor
    # `invoke status`, pays google-cloud-compute's import (every service client, 1.5-2 s).
    shown = logged.space.invoke("status", "--json", "-s", STACK)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert json.loads(shown.stdout)["problems"] == []
    assert watched_imports(logged.imports) == []
