"""Each role docs/security.md asks of whoever runs the tasks ("Who can do what" -> "You, running
the tasks") is needed: without it, the task that needs it stops in one line that names the role.
The fake cloud judges the user's own credentials by the project's bindings (the session's
ADC file, tests/conftest.py); each test takes one role away."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ops.cloud.cloud_api import API_ENDPOINT_ENV
from ops.errors import OpsError
from ops.lifecycle.down_workers import delete_autoscaler_workers
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.identity import USER, USER_ROLES
from tests.support.docs_pages import section, table_rows
from tests.support.engine_stack import EngineWorkspace

PROJECT, ZONE = "my-gcp-project", "us-west1-a"
# The stack whose `up` needs the role (TPU nodes only in a TPU stack).
UP_STACKS = {role: "tpu" if role == "roles/tpu.admin" else "full" for role in USER_ROLES}


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


def test_the_docs_list_exactly_the_roles_the_fake_gives_the_user() -> None:
    rows = table_rows(section("security.md", "### You, running the tasks"))
    assert rows[0] == ["Role", "Why"]
    assert {role.strip("`") for role, _ in rows[1:]} == set(USER_ROLES)


def test_down_workers_only_without_compute_admin_names_the_role(fake, monkeypatch) -> None:
    monkeypatch.setenv(API_ENDPOINT_ENV, fake.endpoint)
    fake.cloud.add_foreign_instance(PROJECT, ZONE, "c-autoscaled", {
        "ray-cluster-name": "c", "ray-node-type": "worker"})
    fake.platform.revoke(PROJECT, "roles/compute.admin", USER)
    with pytest.raises(OpsError) as refused:
        delete_autoscaler_workers(PROJECT, ZONE, "c")
    (line,) = str(refused.value).splitlines()
    assert "Required 'compute.instances.list' permission" in line
    assert "needs roles/compute.admin" in line
    fake.platform.grant(PROJECT, "roles/compute.admin", USER)
    assert delete_autoscaler_workers(PROJECT, ZONE, "c") == ["c-autoscaled"]


@pytest.mark.parametrize("role", USER_ROLES)
def test_up_without_a_documented_role_stops_in_one_line_naming_it(role, fake, engine_bin,
                                                                  tmp_path) -> None:
    # `up -c`: the stack lives in this test's own state folder, nothing in the checkout's
    # stacks/ (so the roles run on any worker, side by side).
    space = EngineWorkspace(fake, engine_bin, root=tmp_path,
                            extra_env={"RAY_GCP_STATE_DIR": str(tmp_path / "state-dir")})
    fake.platform.revoke(PROJECT, role, USER)
    done = space.invoke("up", "-c", f"stacks/clusters/{UP_STACKS[role]}.yaml", "--yes")
    assert done.returncode != 0, done.stdout[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors and f"needs {role}" in errors[-1], done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
