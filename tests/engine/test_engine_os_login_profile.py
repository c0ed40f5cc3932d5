"""`invoke up` and `invoke down` of an OS Login stack clean your OS Login profile, through the
real pulumi CLI on the fake cloud and the fake OS Login (tests/fakes/oslogin.py): `up` removes
the cluster's key where an older version imported it (it sits on the head, readable by every
Ray job), `down` removes it and your own login key, from the profile and this machine."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ops.remote.os_login import ENDPOINT_ENV, KEY_FILE, login_key, public_line
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.identity import USER
from tests.fakes.oslogin import FakeOsLogin
from tests.support.engine_stack import PROJECT_ROOT, EngineWorkspace

# Writes or compares the checkout's stacks/ folder (EngineWorkspace.repo_stack, the stack files a
# refused up must not leave): one worker runs every such test (tests/conftest.py's groups).
pytestmark = pytest.mark.xdist_group("checkout-stacks")

STACK = "engine-os-login"
ACCOUNT = USER.rsplit("/", 1)[-1]  # the session's user (tests/conftest.py), by its email
PROJECT = "my-gcp-project"


@pytest.fixture
def os_login_stack(engine_bin: Path,
                   tmp_path: Path) -> Iterator[tuple[EngineWorkspace, FakeOsLogin]]:
    bin_dir = engine_bin
    cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/minimal.yaml").read_text())
    cluster["cluster_name"] = "oslogin"
    cluster["provider"]["os_login"] = {"principal": f"user:{ACCOUNT}"}
    cluster_file = tmp_path / "oslogin.yaml"
    cluster_file.write_text(yaml.safe_dump(cluster))
    with FakeComputeServer(Faults(operation_s=0.0)) as cloud, \
            FakeOsLogin({ACCOUNT: "you_example_com"}) as fake:
        env = {ENDPOINT_ENV: fake.endpoint, "RAY_GCP_STATE_DIR": str(tmp_path / "local")}
        space = EngineWorkspace(cloud, bin_dir, root=tmp_path / "engine", extra_env=env)
        with space.repo_stack(STACK, {"ray-gcp:cluster": str(cluster_file)}):
            yield space, fake


def cluster_public_key(space: EngineWorkspace) -> str:
    private = subprocess.run(
        [str(Path(space.env["ENGINE_ROOT"]) / "bin" / "pulumi"), "stack", "output",
         "ssh_private_key", "--show-secrets", "-s", STACK, "--cwd", str(PROJECT_ROOT)],
        env={**os.environ, **space.env}, check=True, capture_output=True, text=True).stdout
    found = public_line(private)
    assert found is not None
    return found


@pytest.mark.slow  # over 60 s on the loaded 2-core machine
def test_up_and_down_take_the_cluster_key_and_yours_out_of_your_profile(
        os_login_stack, monkeypatch) -> None:
    space, fake = os_login_stack
    done = space.invoke("up", "-s", STACK)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shared = cluster_public_key(space)
    fake.seed(ACCOUNT, shared, PROJECT)  # what an older version's tasks imported
    done = space.invoke("up", "-s", STACK)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "removed the cluster's key" in done.stdout
    assert fake.profile_keys(ACCOUNT) == {}

    monkeypatch.setenv("RAY_GCP_STATE_DIR", space.env["RAY_GCP_STATE_DIR"])
    yours = login_key(STACK)  # as a task makes it, then imports it
    assert yours is not None
    fake.seed(ACCOUNT, yours.public, PROJECT, expiry_usec=2**62)
    fake.seed(ACCOUNT, shared, PROJECT)
    done = space.invoke("down", "-s", STACK, "-y")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert fake.profile_keys(ACCOUNT) == {}
    assert not (Path(space.env["RAY_GCP_STATE_DIR"]) / STACK / KEY_FILE).exists()
