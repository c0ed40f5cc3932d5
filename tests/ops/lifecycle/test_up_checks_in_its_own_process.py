"""`invoke up` makes `invoke plan`'s checks in its own process (`check_before_create`), before
the up runs the real program there: no interpreter is started for them, the plan it gets is
the document `python -m ops.review.plan` (what `invoke plan` and `invoke diff` run) prints,
and a refusal is that interpreter's own message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ops.errors import OpsError
from ops.review.plan import USER_ERROR_EXIT, check_before_create


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state folder and cache of this test's own (a plan keys the file_mounts archive with a
    secret it keeps in the cache folder)."""
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def planners_interpreter(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ops.review.plan", *arguments],
                          capture_output=True, text=True, check=False)


def test_the_ups_checks_start_no_interpreter_and_give_the_planners_document(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[list[str]] = []
    real_popen = subprocess.Popen

    def recording_popen(args, *rest, **options):  # type: ignore[no-untyped-def]
        started.append(list(args))
        return real_popen(args, *rest, **options)

    with monkeypatch.context() as patched:  # undone before the planner's interpreter runs
        patched.setattr(subprocess, "Popen", recording_popen)
        plan = check_before_create("full")
    assert started == []  # subprocess.run, check_output and the like all go through Popen
    printed = planners_interpreter("--stack", "full")
    assert printed.returncode == 0, printed.stderr
    assert plan == json.loads(printed.stdout)


def test_a_refused_yaml_is_refused_with_the_planners_own_message(isolated: Path) -> None:
    broken = isolated / "cluster.yaml"
    broken.write_text("cluster_name: c\nmax_workers: -1\nprovider: {type: gcp}\n")
    with pytest.raises(OpsError) as refused:
        check_before_create(None, str(broken))
    printed = planners_interpreter("--config", str(broken))
    assert printed.returncode == USER_ERROR_EXIT
    assert str(refused.value) == printed.stderr.strip()
    assert "max_workers: Input should be greater than or equal to 0" in str(refused.value)
