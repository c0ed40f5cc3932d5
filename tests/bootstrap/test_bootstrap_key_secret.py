"""The head reads the cluster's SSH key from Secret Manager (metadata names the secret
version) with its service account's token, writing exactly the stored bytes, mode 0600."""

from __future__ import annotations

import stat

import pytest

from bootstrap.node_metadata import BOOTSTRAP_SSH_KEY_KEY, BOOTSTRAP_SSH_KEY_SECRET_KEY
from bootstrap.startup_script import render_startup_script
from tests.fakes.compute.identity import IDENTITIES
from tests.support.bootstrap_stubs import STUB_ACCOUNT, cluster, granted_node, run_script

VERSION = "projects/my-gcp-project/secrets/ray-stubbed-ssh-key/versions/latest"
PEM = b"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"


def _head(tmp_path, fake, metadata=None, env=None):
    script = render_startup_script(cluster(), "head", "head_t")
    return run_script(script, tmp_path, metadata or {BOOTSTRAP_SSH_KEY_SECRET_KEY: VERSION},
                      env={"RAY_HEAD_IP": "10.0.0.2", "RAY_BOOTSTRAP_SECRET_DELAY": "0",
                           **fake.env(), **(env or {})})


@pytest.mark.parametrize("key", [PEM, PEM.rstrip(b"\n"), PEM + b"\n"],
                         ids=["one-newline", "no-newline", "two-newlines"])
def test_key_file_is_byte_identical_to_the_secret_and_private(tmp_path, key):
    with granted_node(secrets={VERSION: key}) as fake:
        run = _head(tmp_path, fake)
    assert run.returncode == 0, run.log
    key_file = run.home / "ray_bootstrap_key.pem"
    assert key_file.read_bytes() == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert f"/v1/{VERSION}:access" in fake.requests
    assert run.status == "ready"


def test_access_is_retried_until_iam_lets_the_head_read_the_secret(tmp_path):
    with granted_node(secrets={VERSION: PEM}, denials=2) as fake:
        run = _head(tmp_path, fake)
    assert run.returncode == 0, run.log
    assert (run.home / "ray_bootstrap_key.pem").read_bytes() == PEM
    assert run.log.count("Secret Manager answered HTTP 403") == 2
    assert "(try 3)" in run.log


def test_unreadable_secret_fails_the_bootstrap_files_stage_before_ray_starts(tmp_path):
    with granted_node(secrets={VERSION: PEM}, denials=100) as fake:
        run = _head(tmp_path, fake, env={"RAY_BOOTSTRAP_SECRET_TRIES": "3"})
    assert run.returncode == 5
    assert run.status == "failed:bootstrap-files:5"
    assert "could not read secret " + VERSION + " after 3 tries" in run.log
    assert "roles/secretmanager.secretAccessor" in run.log
    assert not any(call.startswith("ray start") for call in run.calls)
    assert not list(run.home.glob("ray_bootstrap_key.pem*"))


def test_the_token_from_the_metadata_server_is_the_bearer(tmp_path):
    with granted_node(secrets={VERSION: PEM}) as fake:
        # a new token of the node's account: the script must ask the metadata server for it
        fake.token = IDENTITIES.vm_token(STUB_ACCOUNT, frozenset(fake.scopes))
        run = _head(tmp_path, fake)
    assert run.returncode == 0, run.log
    assert "/computeMetadata/v1/instance/service-accounts/default/token" in fake.requests
    assert "ya29" not in run.log  # the token is never logged


def test_key_in_metadata_wins_and_secret_manager_is_not_called(tmp_path):
    with granted_node(secrets={VERSION: PEM}) as fake:
        run = _head(tmp_path, fake, metadata={BOOTSTRAP_SSH_KEY_KEY: "local-key\n",
                                              BOOTSTRAP_SSH_KEY_SECRET_KEY: VERSION})
    assert run.returncode == 0, run.log
    assert (run.home / "ray_bootstrap_key.pem").read_text() == "local-key\n"
    assert fake.requests == []
