"""invoke turns off writing bytecode before it loads tasks.py; tasks.py turns it back on, so
the modules a task imports (ops/, Google's client libraries) are compiled once, not on every
run of every task."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def test_a_task_leaves_the_modules_it_imported_compiled_for_the_next_run(tmp_path):
    cache = tmp_path / "pycache"
    env = {**{key: value for key, value in os.environ.items()
              if key != "PYTHONDONTWRITEBYTECODE"},
           "PYTHONPYCACHEPREFIX": str(cache),
           "RAY_GCP_STACK_OUTPUTS": str(tmp_path / "no-outputs.json"),
           "RAY_GCP_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-m", "invoke", "get-head-ip", "--stack", "x"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert "does not exist" in done.stderr  # the task ran as far as reading the outputs
    compiled = {path.name.split(".")[0] for path in cache.rglob("*.pyc")
                if (PROJECT_ROOT / "ops").as_posix().lstrip("/") in path.as_posix()}
    assert {"stack", "errors"} <= compiled
