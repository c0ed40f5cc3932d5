"""The stacks a task creates keep their secrets where the team says, through the real pulumi
CLI: `invoke preview -c` under RAY_GCP_SECRETS_PROVIDER makes its stack with that key service
(here the fake Vault, tests/fakes/vault.py) and generates no passphrase; a tracked stack file's
own `secretsprovider:` wins over the setting (pulumi alone would make the stack with a
passphrase and drop the file's provider)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.vault import shared_vault
from tests.support.engine_stack import PROJECT_ROOT, EngineWorkspace
from tests.support.warm_python import run_module

# Writes a stack file into the checkout's stacks/: with the other such tests, on one worker.
pytestmark = pytest.mark.xdist_group("checkout-stacks")

USERS_OWN = ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")
MINIMAL = PROJECT_ROOT / "stacks" / "clusters" / "minimal.yaml"


@pytest.fixture
def team(engine_bin: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A user with no backend or passphrase of their own, whose team's key is
    `hashivault://team-key` (RAY_GCP_SECRETS_PROVIDER); the state folder in a temp dir. The
    workspace's backend is kept as BACKEND, for a team's own."""
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, engine_bin, root=tmp_path / "engine",
                                secrets_provider="hashivault://team-key")
        env = {key: value for key, value in {**os.environ, **space.env}.items()
               if key not in USERS_OWN}
        env["RAY_GCP_STATE_DIR"] = str(tmp_path / "state-dir")
        env["BACKEND"] = space.env["PULUMI_BACKEND_URL"]
        yield env


def preview(env: dict[str, str], *args: str) -> None:
    done = run_module(["invoke", "preview", *args], cwd=PROJECT_ROOT, env=env, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def made_with(env: dict[str, str], stack: str) -> dict[str, str]:
    """The top of the stack file the engine wrote for `stack` (its config left out)."""
    path = Path(env["RAY_GCP_STATE_DIR"]) / "stacks" / f"Pulumi.{stack}.yaml"
    document = yaml.safe_load(path.read_text())
    return {key: value for key, value in document.items() if key != "config"}


def test_preview_c_makes_its_stack_under_the_teams_key_and_no_passphrase(team, tmp_path):
    cluster = yaml.safe_load(MINIMAL.read_text())
    cluster["cluster_name"] = "team-secrets"
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(cluster))
    before = list(shared_vault().calls)
    preview(team, "-c", str(mine))
    made = made_with(team, "team-secrets")
    assert made.keys() == {"secretsprovider", "encryptedkey"}, made
    assert made["secretsprovider"] == "hashivault://team-key"
    assert ("encrypt", "team-key") in shared_vault().calls[len(before):]
    assert not (Path(team["RAY_GCP_STATE_DIR"]) / ".pulumi-passphrase").exists()


def test_a_tracked_stack_files_provider_wins_over_the_setting(team):
    """A platform team's checkout: its stack file in stacks/, its state in its backend."""
    team = {**team, "PULUMI_BACKEND_URL": team["BACKEND"]}
    stack = "engine-tracked-secrets"
    tracked = PROJECT_ROOT / "stacks" / f"Pulumi.{stack}.yaml"
    tracked.write_text(yaml.safe_dump({"secretsprovider": "hashivault://tracked-key",
                                       "config": {"ray-gcp:cluster": str(MINIMAL)}}))
    try:
        before = list(shared_vault().calls)
        preview(team, "-s", stack)
        made = made_with(team, stack)
        assert made["secretsprovider"] == "hashivault://tracked-key" and made["encryptedkey"]
        keys = {key for _, key in shared_vault().calls[len(before):]}
        assert "tracked-key" in keys and "team-key" not in keys
        assert "encryptedkey" not in yaml.safe_load(tracked.read_text())  # never written
    finally:
        tracked.unlink(missing_ok=True)
