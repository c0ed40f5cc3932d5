"""Shared test set-up: every test runs from the project root with no pulumi stack selected.

`engine_bin` is the pinned pulumi engine `invoke engine` installed, for tests marked `engine`;
`engine_env` the environment that keeps such a test to itself (its own PULUMI_HOME, a file
backend and a passphrase in a temp dir, no update check, no plugin download)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
ENGINE_PASSPHRASE = "engine-tests-passphrase"


@pytest.fixture(autouse=True)
def _project_root_cwd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT_ROOT)
    monkeypatch.delenv("PULUMI_STACK", raising=False)


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
