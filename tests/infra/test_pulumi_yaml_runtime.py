"""Pulumi.yaml's runtime names the environment `uv sync --locked` makes from uv.lock: it exists,
holds the pulumi SDK the lock pins, and has this project importable (the engine's dynamic
provider plugin runs that environment's python and unpickles our providers there)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from tests.conftest import PROJECT_ROOT


def _runtime() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "Pulumi.yaml").read_text())["runtime"]


def _locked_version(package: str) -> str:
    """From uv.lock's `[[package]]` table (tomllib is 3.11+, the project runs on 3.10)."""
    lock = (PROJECT_ROOT / "uv.lock").read_text()
    (version,) = re.findall(rf'^name = "{re.escape(package)}"\nversion = "([^"]+)"', lock, re.M)
    return version


def test_the_runtime_is_python_through_uv_with_the_lock_beside_it():
    runtime = _runtime()
    assert runtime["name"] == "python"
    assert runtime["options"]["toolchain"] == "uv"
    assert (PROJECT_ROOT / "uv.lock").is_file()  # what `toolchain: uv` syncs from


def test_the_named_virtualenv_imports_the_project_and_the_locked_pulumi():
    venv = PROJECT_ROOT / _runtime()["options"]["virtualenv"]
    assert (venv / "pyvenv.cfg").is_file(), f"{venv}: run `uv sync --locked`"
    probe = ("import infra, infra.workers.provider, pulumi, importlib.metadata as m; "
             "print(infra.__file__); print(m.version('pulumi'))")
    shown = subprocess.run([venv / "bin" / "python", "-c", probe], cwd="/", capture_output=True,
                           text=True, timeout=120, check=True).stdout.split()
    assert Path(shown[0]).resolve().parent == PROJECT_ROOT / "infra"
    assert shown[1] == _locked_version("pulumi")
