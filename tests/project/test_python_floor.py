"""The Python range the project claims (issue 43): `requires-python` is the floor the code
runs on (3.11.2, Debian 12's own python3.11: no tarfile extraction filters), the lock was made
for that range, `.python-version` pins an interpreter inside it, and CI runs the floor subset
on exactly that floor."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from packaging.specifiers import SpecifierSet
from packaging.version import Version

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def requires_python() -> str:
    return tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"][
        "requires-python"]


def test_the_floor_admits_debians_own_python_and_nothing_older():
    claimed = SpecifierSet(requires_python())
    assert "3.11.2" in claimed  # Debian 12's python3.11, where uv picks the machine's own
    assert "3.11.1" not in claimed and "3.10.13" not in claimed


def test_the_lock_and_the_pinned_interpreter_agree_with_the_floor():
    lock = tomllib.loads((PROJECT_ROOT / "uv.lock").read_text())
    assert lock["requires-python"] == requires_python()
    pinned = (PROJECT_ROOT / ".python-version").read_text().strip()
    assert Version(pinned) in SpecifierSet(requires_python())


def test_ci_runs_the_floor_subset_on_the_floor_itself():
    script = (PROJECT_ROOT / ".ci" / "run").read_text()
    assert re.search(r'--python "\$floor"', script)
    floor = re.fullmatch(r">=(\S+)", requires_python())
    assert floor, "requires-python must be a plain floor for .ci/run to read it"
    listed = (PROJECT_ROOT / ".ci" / "floor-tests").read_text().split()
    assert listed and all((PROJECT_ROOT / name).is_file() for name in listed)
