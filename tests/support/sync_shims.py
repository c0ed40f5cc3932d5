"""Programs first on a task's PATH that note how a sync went, for the tests of both ways
(tests/ops/remote/test_ops_bulk_sync.py up, tests/ops/remote/test_ops_bulk_fetch.py down): an `ssh`
that notes each
run, and a `tar` that notes each run and may say it is not GNU's (as a Mac's bsdtar does), so
that the task takes Python's tarfile. Both then run the system's own program."""

from __future__ import annotations

from pathlib import Path

from tests.support.tools import require_tool


def logging_ssh(shims: Path, log: Path) -> None:
    """`ssh` in `shims`: notes each run in `log`, then is the system's."""
    shims.mkdir(exist_ok=True)
    (shims / "ssh").write_text(f'#!/bin/sh\necho run >> "{log}"\n'
                               f'exec "{require_tool("ssh")}" "$@"\n')
    (shims / "ssh").chmod(0o755)


def logging_tar(shims: Path, log: Path, gnu: bool) -> None:
    """`tar` in `shims`: notes each run but `--version` in `log`, then is the system's; when
    not `gnu`, its `--version` says bsdtar."""
    shims.mkdir(exist_ok=True)
    version = (f'exec "{require_tool("tar")}" --version' if gnu
               else 'echo "bsdtar 3.7.2 - libarchive 3.7.2"; exit 0')
    (shims / "tar").write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then {version}; fi\n'
                               f'echo run >> "{log}"\nexec "{require_tool("tar")}" "$@"\n')
    (shims / "tar").chmod(0o755)
