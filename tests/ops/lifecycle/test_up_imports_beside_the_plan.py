"""`invoke up` imports what its up needs while the checks' plan runs in its own interpreter
(`import_for_the_up` beside `check_before_create`): the plan's interpreter is running while the
imports run, its answer (a plan or a refusal) is still what the up gets, and a failure beside
it stops that interpreter, leaving no process behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ops.errors import OpsError
from ops.lifecycle.pulumi_cli import import_for_the_up
from ops.review.plan import check_before_create
from tests.conftest import PROJECT_ROOT
from tests.support.proc_table import PROC, children


def plan_interpreters() -> list[int]:
    """This process's children that run the plan's interpreter (`python -m ops.review.plan`)."""
    found = []
    for child in children().get(os.getpid(), []):
        try:
            command = (PROC / str(child) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"ops.review.plan" in command:
            found.append(child)
    return found


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state folder of this test's own."""
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


def test_the_up_imports_while_the_plan_runs_then_gets_the_plan(isolated: Path) -> None:
    running: list[list[int]] = []

    def meanwhile() -> None:
        running.append(plan_interpreters())
        import_for_the_up()

    plan = check_before_create("minimal", meanwhile=meanwhile)
    assert [len(seen) for seen in running] == [1], running  # called once, beside the plan
    assert plan["stack"] == "minimal" and plan["resources"], plan.keys()
    assert plan_interpreters() == []


def test_a_refused_yaml_is_refused_after_the_imports_beside_it(isolated: Path) -> None:
    broken = isolated / "cluster.yaml"
    broken.write_text("cluster_name: c\nmax_workers: -1\nprovider: {type: gcp}\n")
    calls: list[str] = []
    with pytest.raises(OpsError) as refused:
        check_before_create(None, str(broken), meanwhile=lambda: calls.append("imports"))
    assert calls == ["imports"]
    assert str(refused.value).startswith(f"invalid cluster config {broken}:")
    assert "max_workers: Input should be greater than or equal to 0" in str(refused.value)
    assert plan_interpreters() == []


def test_a_failure_beside_the_plan_stops_its_interpreter(isolated: Path) -> None:
    def broken_environment() -> None:
        assert len(plan_interpreters()) == 1
        raise ImportError("No module named 'google.cloud.compute_v1'")

    with pytest.raises(ImportError):
        check_before_create("minimal", meanwhile=broken_environment)
    assert plan_interpreters() == []


def test_what_the_up_imports_beside_the_plan_is_not_google_cloud_compute() -> None:
    """The network check and the quota pre-flight call Compute over REST: what is imported
    for them is google-auth's transport and google-api-core's errors, not the client library
    whose package loads every Compute service client."""
    probe = ("import sys\nfrom ops.lifecycle.pulumi_cli import import_for_the_up\n"
             "import_for_the_up()\n"
             "print(sorted(m for m in ('google.cloud.compute_v1', "
             "'google.auth.transport.requests', 'google.api_core.exceptions') "
             "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == \
        "['google.api_core.exceptions', 'google.auth.transport.requests']"
