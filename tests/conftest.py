"""Shared test set-up: every test runs from the project root with no pulumi stack selected."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from leftover_processes import leftover_processes

PROJECT_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _project_root_cwd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT_ROOT)
    monkeypatch.delenv("PULUMI_STACK", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _no_process_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Set up first, so torn down last (after the sshd and other session fixtures): the
    session fails if a process it started is still running (a head's watchers or autostop
    daemon, a server a test forgot), naming each; they are ended so the next run starts
    clean."""
    yield
    basetemp = tmp_path_factory.getbasetemp()
    deadline = time.monotonic() + 10  # a SIGTERM just sent takes a moment to land
    while (left := leftover_processes(basetemp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, "the test session left these processes running: " + "; ".join(
        f"pid {pid}: {command[:200]}" for pid, command in left.items())
