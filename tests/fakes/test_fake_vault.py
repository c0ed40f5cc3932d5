"""The fake Vault refuses what Vault's transit engine refuses, driven by its real client (the
pinned pulumi CLI's `hashivault://` provider): a stack's data key decrypts only under the key
that encrypted it, a key never made is "encryption key not found", a token it never issued is
"permission denied"; a body that is not what the API takes is refused as Vault does."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from tests.fakes.vault import FakeVault


def pulumi(engine_bin: Path, folder: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run([str(engine_bin / "pulumi"), *args, "--non-interactive"], cwd=folder,
                          env={"PATH": os.environ["PATH"], "PULUMI_HOME": str(folder / "home"),
                               "PULUMI_SKIP_UPDATE_CHECK": "true",
                               "PULUMI_BACKEND_URL": f"file://{folder / 'state'}", **env},
                          capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def test_a_data_key_opens_only_under_its_own_key(engine_bin, tmp_path):
    (tmp_path / "state").mkdir()
    (tmp_path / "Pulumi.yaml").write_text("name: x\nruntime: yaml\n")
    with FakeVault() as vault:
        for stack, key in (("one", "first"), ("two", "second")):
            said = pulumi(engine_bin, tmp_path, vault.env(), "stack", "init", stack,
                          "--secrets-provider", f"hashivault://{key}")
            assert "Created stack" in said, said
        pulumi(engine_bin, tmp_path, vault.env(), "config", "set", "--secret", "k", "v", "-s",
               "one")
        assert pulumi(engine_bin, tmp_path, vault.env(), "config", "get", "k", "-s",
                      "one").strip() == "v"
        settings = tmp_path / "Pulumi.one.yaml"
        document = yaml.safe_load(settings.read_text())
        for key, refusal in (("second", "cipher: message authentication failed"),
                             ("never-made", "encryption key not found")):
            settings.write_text(yaml.safe_dump({**document,
                                                "secretsprovider": f"hashivault://{key}"}))
            said = pulumi(engine_bin, tmp_path, vault.env(), "config", "get", "k", "-s", "one")
            assert "Code: 400" in said and refusal in said, said
        settings.write_text(yaml.safe_dump(document))
        said = pulumi(engine_bin, tmp_path, {**vault.env(), "VAULT_SERVER_TOKEN": "hvs.other"},
                      "config", "get", "k", "-s", "one")
        assert "Code: 403" in said and "permission denied" in said, said
        assert vault.keys.keys() == {"first", "second"}  # decrypting never makes a key


def test_bodies_the_transit_api_does_not_take_are_refused_as_vault_does():
    with FakeVault() as vault:
        def call(path: str, body: bytes, token: str = vault.token) -> tuple[int, dict]:
            request = urllib.request.Request(f"{vault.address}{path}", data=body, method="PUT",
                                             headers={"X-Vault-Token": token})
            try:
                with urllib.request.urlopen(request) as answer:
                    return answer.status, json.loads(answer.read())
            except urllib.error.HTTPError as refused:
                return refused.code, json.loads(refused.read())

        assert call("/v1/transit/encrypt/k", b'{"plaintext": "not base64!"}') == \
            (400, {"errors": ["failed to base64-decode plaintext"]})
        assert call("/v1/transit/encrypt/k", b"{") == (400, {"errors": [
            "failed to parse JSON input"]})
        status, made = call("/v1/transit/encrypt/k", b'{"plaintext": "aGk="}')
        assert status == 200 and made["data"]["ciphertext"].startswith("vault:v1:")
        assert call("/v1/transit/decrypt/k", b'{"ciphertext": "aGk="}') == \
            (400, {"errors": ["invalid ciphertext: no prefix"]})
        assert call("/v1/transit/decrypt/k", json.dumps(
            {"ciphertext": made["data"]["ciphertext"]}).encode())[1]["data"] == \
            {"plaintext": "aGk="}
        assert call("/v1/secret/data/k", b"{}")[0] == 404
        assert call("/v1/transit/encrypt/k", b'{"plaintext": "aGk="}', token="") == \
            (403, {"errors": ["permission denied"]})
