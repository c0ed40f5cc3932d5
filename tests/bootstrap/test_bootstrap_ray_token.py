"""Ray's token auth on every node: the rendered script reads the token from Secret Manager (the
metadata names the secret version) with the node's service account, writes it 0600 where Ray
reads it (inside the container with docker), and every `ray` it runs has RAY_AUTH_MODE=token
and RAY_AUTH_TOKEN_PATH; the token is never logged. `provider.ray_token_auth: false` leaves it
all out."""

from __future__ import annotations

import stat

import pytest

from bootstrap.node_metadata import RAY_AUTH_TOKEN_FILE, RAY_AUTH_TOKEN_SECRET_KEY
from bootstrap.startup_script import render_startup_script
from tests.support.bootstrap_stubs import (
    CLOUD_PLATFORM,
    SECRET_ACCESSOR,
    STUB_ACCOUNT,
    FakeGoogle,
    cluster,
    granted_node,
    run_script,
    secret_of,
)

VERSION = "projects/my-gcp-project/secrets/ray-stubbed-auth-token/versions/1"
TOKEN = "5e3c" * 16
ROLES = [("head", "head_t"), ("worker", "worker_t")]
STORAGE_READ_ONLY = "https://www.googleapis.com/auth/devstorage.read_only"


def _node(tmp_path, fake, role, node_type, config=None, metadata=None, env=None):
    script = render_startup_script(config or cluster(), role, node_type)
    return run_script(
        script, tmp_path,
        {RAY_AUTH_TOKEN_SECRET_KEY: VERSION} if metadata is None else metadata,
        env={"RAY_HEAD_IP": "10.0.0.2", "RAY_BOOTSTRAP_SECRET_DELAY": "0", **fake.env(),
             **(env or {})},
    )


@pytest.mark.parametrize(("role", "node_type"), ROLES)
def test_every_ray_command_runs_with_the_token_read_from_secret_manager(tmp_path, role,
                                                                        node_type):
    with granted_node(secrets={VERSION: TOKEN.encode()}) as fake:
        run = _node(tmp_path, fake, role, node_type)
    assert run.returncode == 0, run.log
    assert f"/v1/{VERSION}:access" in fake.requests
    token_file = run.home / RAY_AUTH_TOKEN_FILE
    assert token_file.read_text() == TOKEN
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert [call[0] for call in run.ray_auth] == ["stop", "start"]
    assert all(call[1:] == ["token", str(token_file)] for call in run.ray_auth), run.ray_auth
    assert TOKEN not in run.log
    assert run.status == "ready"


def test_a_worker_waits_until_iam_lets_it_read_the_token(tmp_path):
    with granted_node(secrets={VERSION: TOKEN.encode()}, denials=2) as fake:
        run = _node(tmp_path, fake, "worker", "worker_t")
    assert run.returncode == 0, run.log
    assert run.log.count("Secret Manager answered HTTP 403") == 2
    assert (run.home / RAY_AUTH_TOKEN_FILE).read_text() == TOKEN


def test_an_unreadable_token_fails_the_node_before_ray_starts(tmp_path):
    with granted_node(secrets={VERSION: TOKEN.encode()}, denials=100) as fake:
        run = _node(tmp_path, fake, "worker", "worker_t", env={"RAY_BOOTSTRAP_SECRET_TRIES": "2"})
    assert run.returncode == 8
    assert run.status == "failed:ray-auth:8"
    assert "roles/secretmanager.secretAccessor" in run.log
    assert not any(call.startswith("ray start") for call in run.calls)


def test_a_node_without_the_token_secret_in_metadata_refuses_to_start_ray(tmp_path):
    with granted_node() as fake:
        run = _node(tmp_path, fake, "worker", "worker_t", metadata={},
                    env={"RAY_AUTH_TOKEN_PATH": ""})
    assert run.returncode == 8
    assert RAY_AUTH_TOKEN_SECRET_KEY in run.log
    assert not any(call.startswith("ray start") for call in run.calls)


def test_with_docker_the_token_is_installed_in_the_container_for_its_user(tmp_path):
    config = cluster(docker={"image": "rayproject/ray:2.9", "container_name": "rc"})
    root = tmp_path / "container"
    root.mkdir()
    with granted_node(secrets={VERSION: TOKEN.encode()}) as fake:
        run = _node(tmp_path, fake, "worker", "worker_t", config=config,
                    env={"STUB_CONTAINER_ROOT": str(root), "STUB_CONTAINER_UID": "1000",
                         "STUB_CONTAINER_GID": "100"})
    assert run.returncode == 0, run.log
    # The stub's container filesystem; the image's HOME is /root (the stub's image has none).
    inside = root / "root" / ".ray" / "auth_token"
    assert inside.read_text() == TOKEN
    assert stat.S_IMODE(inside.stat().st_mode) == 0o600
    assert "docker exec -u 0 rc chown 1000:100 /root/.ray/auth_token.tmp" in run.calls
    assert all(call[1:] == ["token", "/root/.ray/auth_token"] for call in run.ray_auth), \
        run.ray_auth
    assert not any(TOKEN in call for call in run.calls)  # on no command line
    assert TOKEN not in run.log


def test_turned_off_no_token_is_read_and_ray_runs_without_auth(tmp_path):
    config = cluster(provider={"type": "gcp", "region": "us-west1",
                               "availability_zone": "us-west1-a",
                               "project_id": "my-gcp-project", "ray_token_auth": False})
    with granted_node(secrets={VERSION: TOKEN.encode()}) as fake:
        run = _node(tmp_path, fake, "head", "head_t", config=config, metadata={},
                    env={"RAY_AUTH_TOKEN_PATH": ""})
    assert run.returncode == 0, run.log
    assert fake.requests == []
    assert not (run.home / RAY_AUTH_TOKEN_FILE).exists()
    assert all(call[1] == "-" for call in run.ray_auth), run.ray_auth


def test_a_worker_without_a_service_account_gets_no_token_and_never_starts_ray(tmp_path):
    """GCE's metadata server has no `default` account for such a VM: 404, no token."""
    with FakeGoogle(secrets={VERSION: TOKEN.encode()}) as fake:
        run = _node(tmp_path, fake, "worker", "worker_t", env={"RAY_BOOTSTRAP_SECRET_TRIES": "2"})
    assert run.returncode == 8
    assert "no access token from the metadata server" in run.log
    assert not any(r.endswith(":access") for r in fake.requests)
    assert not any(call.startswith("ray start") for call in run.calls)


def test_a_storage_read_only_token_is_refused_by_secret_manager(tmp_path):
    with FakeGoogle(service_account=STUB_ACCOUNT, scopes=(STORAGE_READ_ONLY,),
                    secrets={VERSION: TOKEN.encode()}) as fake:
        fake.grant(secret_of(VERSION), SECRET_ACCESSOR)
        run = _node(tmp_path, fake, "worker", "worker_t", env={"RAY_BOOTSTRAP_SECRET_TRIES": "2"})
    assert run.returncode == 8
    assert "ACCESS_TOKEN_SCOPE_INSUFFICIENT" in run.log
    assert not any(call.startswith("ray start") for call in run.calls)


def test_an_account_without_the_accessor_grant_on_this_secret_is_refused(tmp_path):
    """A grant on another cluster's secret gives nothing on this one."""
    with FakeGoogle(service_account=STUB_ACCOUNT, scopes=(CLOUD_PLATFORM,),
                    secrets={VERSION: TOKEN.encode()}) as fake:
        fake.grant("projects/my-gcp-project/secrets/ray-other-auth-token", SECRET_ACCESSOR)
        run = _node(tmp_path, fake, "worker", "worker_t", env={"RAY_BOOTSTRAP_SECRET_TRIES": "2"})
    assert run.returncode == 8
    assert "Permission 'secretmanager.versions.access' denied" in run.log
    assert TOKEN not in run.log
