"""The secrets provider a stack a task creates is made with: the stack file's own
`secretsprovider:` over RAY_GCP_SECRETS_PROVIDER, pulumi's default without either, and a value
pulumi cannot take refused in one line naming where it came from, before anything is written
(tests/engine/test_engine_secrets_provider.py: the stacks the engine then makes)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from model.stack_config import PROJECT_ROOT
from ops.errors import OpsError
from ops.lifecycle.cluster_yaml import stack_from_yaml
from ops.stacks.stack import new_stack_secrets_provider

MINIMAL = PROJECT_ROOT / "stacks" / "clusters" / "minimal.yaml"
KMS = "gcpkms://projects/p/locations/global/keyRings/pulumi/cryptoKeys/stacks"


@pytest.fixture
def nobody(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user who set up nothing for pulumi; the state folder in a temp dir."""
    for name in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE",
                 "PULUMI_CONFIG_PASSPHRASE_FILE", "RAY_GCP_SECRETS_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def stack_file(folder: Path, name: str = "team", **top: object) -> Path:
    path = folder / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({**top, "config": {"ray-gcp:cluster": str(MINIMAL)}}))
    return path


def test_the_stack_files_provider_wins_over_the_setting_which_wins_over_pulumis_default(
        tmp_path, nobody, monkeypatch):
    plain = stack_file(tmp_path)
    assert new_stack_secrets_provider(plain) is None  # pulumi's own default
    monkeypatch.setenv("RAY_GCP_SECRETS_PROVIDER", KMS)
    assert new_stack_secrets_provider(plain) == KMS
    assert new_stack_secrets_provider(tmp_path / "missing.yaml") == KMS
    teams = stack_file(tmp_path, "kept", secretsprovider="hashivault://team-key")
    assert new_stack_secrets_provider(teams) == "hashivault://team-key"
    monkeypatch.setenv("RAY_GCP_SECRETS_PROVIDER", "passphrase")
    assert new_stack_secrets_provider(plain) == "passphrase"


@pytest.mark.parametrize("value", ["kms://projects/p", "gcpkms://", "vault", "https://k"])
def test_a_provider_pulumi_cannot_take_is_one_line_naming_the_setting(
        value, tmp_path, nobody, monkeypatch):
    monkeypatch.setenv("RAY_GCP_SECRETS_PROVIDER", value)
    with pytest.raises(OpsError) as refused:
        new_stack_secrets_provider(stack_file(tmp_path))
    said = str(refused.value)
    assert said.startswith(f"RAY_GCP_SECRETS_PROVIDER: {value!r} is not a pulumi secrets "
                           "provider: give `passphrase` or a key's URL (gcpkms://")
    assert "\n" not in said


def test_a_stack_files_provider_pulumi_cannot_take_names_the_file(tmp_path, nobody):
    path = stack_file(tmp_path, secretsprovider=["gcpkms://a"])
    with pytest.raises(OpsError, match=rf"^{path}: secretsprovider: \['gcpkms://a'\] is not"):
        new_stack_secrets_provider(path)


def test_up_c_with_a_bad_provider_writes_no_stack_file_and_no_passphrase(
        tmp_path, nobody, monkeypatch):
    cluster = yaml.safe_load(MINIMAL.read_text())
    cluster["cluster_name"] = "mine"
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(cluster))
    monkeypatch.setenv("RAY_GCP_SECRETS_PROVIDER", "gcpkms:/no-host")
    with pytest.raises(OpsError, match="^RAY_GCP_SECRETS_PROVIDER: 'gcpkms:/no-host' is not"):
        stack_from_yaml(None, str(mine), create=True, out=io.StringIO())
    assert not (nobody / "stacks").exists()
    assert not (nobody / ".pulumi-passphrase").exists()
