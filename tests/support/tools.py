"""The programs tests run, found the way a clean machine has them.

Python tools come from this test run's own environment (the `bin/` beside `sys.executable`),
never from PATH: an environment that is not activated is not on PATH. System tools that
`.ci/run` installs (shellcheck, tmux, screen, rsync) are looked up on PATH; when one is missing
a developer's run skips the test, but CI (`CI=true`) fails it, so a test cannot vanish from CI.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ENV_BIN = Path(sys.executable).parent


def env_tool(name: str) -> str:
    """A console script of this environment (`ray`, `invoke`, ...), by its full path."""
    path = ENV_BIN / name
    assert path.is_file(), f"{path} is missing: run the tests in the project's environment"
    return str(path)


def require_tool(program: str) -> str:
    """The path of a system tool CI installs; skip without it, or fail under CI."""
    path = shutil.which(program)
    if path is None:
        message = f"{program} is not installed (apt-get install {program})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}: .ci/run installs it, so CI must not skip this test")
        pytest.skip(message)
    return path
