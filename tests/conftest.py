"""Shared test set-up: every test runs from the project root with no pulumi stack selected.

`engine_bin` is the pinned pulumi engine `invoke engine` installed, for tests marked `engine`;
`engine_env` the environment that keeps such a test to itself (its own PULUMI_HOME, a file
backend and a passphrase in a temp dir, no update check, no plugin download). At the session's
end, a process the session started and left running fails it (`_no_process_left_behind`)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from leftover_processes import leftover_processes

from tests.fake_compute.identity import signed_in_user

PROJECT_ROOT = Path(__file__).resolve().parents[1]
ENGINE_PASSPHRASE = "engine-tests-passphrase"


@pytest.fixture(autouse=True)
def _project_root_cwd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT_ROOT)
    monkeypatch.delenv("PULUMI_STACK", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _user_credentials(_no_process_left_behind: None) -> Iterator[None]:
    """The user's own Google credentials, as `gcloud auth application-default login` leaves
    them for a workforce user (GOOGLE_APPLICATION_CREDENTIALS), refreshing at a fake
    OAuth endpoint: every call the product makes to the fake APIs (tests/fake_compute)
    presents the user's identity, which the fakes check (tests/fake_compute/identity.py)."""
    with signed_in_user():
        yield


@pytest.fixture(scope="session")
def engine_bin() -> Path:
    """The bin folder of the pinned engine. Missing, the test fails under CI=true (CI runs
    `invoke engine` first: a missing engine there is a broken CI) and is skipped elsewhere."""
    from ops.engine import engine_root, installed_bin

    found = installed_bin()
    if found is None:
        message = f"no pulumi engine in {engine_root() / 'bin'}: run `invoke engine` first"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture
def engine_env(tmp_path: Path) -> dict[str, str]:
    """Environment variables for the engine (pass as the Automation API's `env_vars`, or
    over os.environ to a CLI subprocess): everything it writes goes under `tmp_path`."""
    home, state = tmp_path / "pulumi-home", tmp_path / "state"
    home.mkdir()
    state.mkdir()
    return {
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": state.as_uri(),
        "PULUMI_CONFIG_PASSPHRASE": ENGINE_PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
    }


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
