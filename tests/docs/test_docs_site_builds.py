"""The docs site builds with `mkdocs build --strict` (as .ci/run builds it): a link to a page
or a heading that is not there, a page left out of the nav, a file a page includes that does
not exist, each fails it. Built into a temporary folder, never into the repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.docs_pages import PROJECT_ROOT


def build(root: Path, into: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(into)],
        cwd=root, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True, text=True, timeout=120)


def test_the_site_builds_strict_with_no_broken_link(tmp_path: Path) -> None:
    built = build(PROJECT_ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "site/index.html").is_file()
