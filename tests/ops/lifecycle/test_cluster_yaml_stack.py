"""`-c cluster.yaml` names its stack: the YAML's cluster_name, a stack file naming the YAML, a
refusal when that stack deploys another YAML, the local file backend and a generated 0600
passphrase unless the user gives their own, and nothing written for a YAML that fails a check."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from model.stack_config import PROJECT_ROOT
from ops.errors import OpsError
from ops.lifecycle.cluster_yaml import place_stack
from ops.paths import passphrase_file
from ops.stacks.stack import backend_env, stack_for_cluster_yaml
from tests.support.warm_python import run_module

MINIMAL = PROJECT_ROOT / "stacks" / "clusters" / "minimal.yaml"
USERS_OWN = ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE",
             "RAY_GCP_SECRETS_PROVIDER")


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user who set up nothing for pulumi, with the state folder in a temp dir."""
    for name in USERS_OWN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def cluster_yaml(folder: Path, cluster_name: str, **provider: object) -> Path:
    cluster = yaml.safe_load(MINIMAL.read_text())
    cluster["cluster_name"] = cluster_name
    cluster["provider"].update(provider)
    path = folder / f"{cluster_name}-{len(list(folder.glob('*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(cluster))
    return path


def test_the_stack_is_the_cluster_name_and_its_new_file_names_the_yaml(tmp_path, state_dir):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    mine = cluster_yaml(tmp_path, "my-cluster")
    found = stack_for_cluster_yaml(str(mine), stacks)
    assert (found.name, found.exists) == ("my-cluster", False)
    place_stack(found, io.StringIO())
    written = yaml.safe_load((stacks / "Pulumi.my-cluster.yaml").read_text())
    assert written == {"config": {"ray-gcp:cluster": str(mine)}}
    assert stack_for_cluster_yaml(str(mine), stacks).exists  # the next run reuses it


def test_a_yaml_is_named_by_its_absolute_path_from_the_state_folder(tmp_path, state_dir):
    # The stack file lives in the state folder, the YAML in the user's: a relative path would
    # be read against the installed tool's folder.
    found = stack_for_cluster_yaml("stacks/clusters/../clusters/minimal.yaml", tmp_path)
    assert Path(found.setting).is_absolute()
    assert Path(found.setting).resolve() == MINIMAL


def test_another_yaml_with_a_taken_cluster_name_is_refused_naming_both(tmp_path, state_dir):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    first = cluster_yaml(tmp_path, "shared-name")
    place_stack(stack_for_cluster_yaml(str(first), stacks), io.StringIO())
    before = (stacks / "Pulumi.shared-name.yaml").read_text()
    second = cluster_yaml(tmp_path, "shared-name", availability_zone="us-west1-b")
    with pytest.raises(OpsError) as refused:
        stack_for_cluster_yaml(str(second), stacks)
    message = str(refused.value)
    assert "\n" not in message
    assert str(second) in message and str(first) in message
    assert (stacks / "Pulumi.shared-name.yaml").read_text() == before


def test_a_stack_file_with_an_inline_cluster_is_not_taken_over(tmp_path, state_dir):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    inline = yaml.safe_load(MINIMAL.read_text()) | {"cluster_name": "inline-one"}
    (stacks / "Pulumi.inline-one.yaml").write_text(
        yaml.safe_dump({"config": {"ray-gcp:clusterConfig": inline}}))
    with pytest.raises(OpsError, match="inline in its ray-gcp:clusterConfig"):
        stack_for_cluster_yaml(str(cluster_yaml(tmp_path, "inline-one")), stacks)


def test_a_new_stack_lives_in_the_state_folders_backend_with_a_generated_passphrase(
        tmp_path, state_dir):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    place_stack(stack_for_cluster_yaml(str(cluster_yaml(tmp_path, "local-one")), stacks),
                io.StringIO())
    env = backend_env("local-one")
    assert env["PULUMI_BACKEND_URL"] == f"file://{state_dir}"
    assert stat.S_IMODE((state_dir / ".pulumi").stat().st_mode) == 0o700
    passphrase = Path(env["PULUMI_CONFIG_PASSPHRASE_FILE"])
    assert passphrase.parent == state_dir
    assert stat.S_IMODE(passphrase.stat().st_mode) == 0o600
    assert len(passphrase.read_text()) >= 32
    assert "PULUMI_BACKEND_URL" not in backend_env("a-stack-made-elsewhere")


def test_the_passphrase_is_generated_once_and_never_through_a_link(tmp_path, state_dir):
    made = passphrase_file(create=True)
    assert made is not None
    text = made.read_text()
    assert passphrase_file(create=True) == made and made.read_text() == text
    made.unlink()
    (tmp_path / "elsewhere").write_text("x")
    made.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OpsError, match="symbolic link"):
        passphrase_file(create=False)


def test_the_users_own_backend_and_passphrase_are_used_instead(tmp_path, state_dir,
                                                               monkeypatch):
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path / 'theirs'}")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "their own")
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    out = io.StringIO()
    place_stack(stack_for_cluster_yaml(str(cluster_yaml(tmp_path, "their-one")), stacks), out)
    assert backend_env("their-one") == {}
    assert not (state_dir / ".pulumi-passphrase").exists()
    assert not (state_dir / "their-one").exists()
    assert "the backend PULUMI_BACKEND_URL names" in out.getvalue()


def run_task(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in USERS_OWN}
    return run_module(["invoke", *args], cwd=PROJECT_ROOT,
                      env={**env, "RAY_GCP_STATE_DIR": str(state)}, timeout=300)


@pytest.mark.parametrize(("cluster_name", "provider", "named"), [
    ("bad-yaml-writes-nothing", {"project_id": 123}, "provider.project_id"),
    # Not a GCE name prefix, nor a stack name pulumi takes: refused, never renamed.
    ("Bad_Name", {}, "cluster_name"),
])
def test_a_yaml_that_fails_a_check_writes_nothing(tmp_path, cluster_name, provider, named):
    bad = cluster_yaml(tmp_path, cluster_name, **provider)
    for task in ("up", "preview"):
        done = run_task(task, "-c", str(bad), "-y" if task == "up" else "--diff",
                        state=tmp_path / "state")
        assert done.returncode == 1, done.stderr
        assert named in done.stderr and "Traceback" not in done.stderr
    assert not (PROJECT_ROOT / "stacks" / f"Pulumi.{cluster_name}.yaml").exists()
    assert not (tmp_path / "state").exists()


def test_down_with_a_yaml_no_stack_deploys_says_so_and_writes_nothing(tmp_path):
    fresh = cluster_yaml(tmp_path, "never-deployed-here")
    done = run_task("down", "-c", str(fresh), "-y", state=tmp_path / "state")
    assert done.returncode == 1
    assert "no stack deploys it yet" in done.stderr and f"invoke up -c {fresh}" in done.stderr
    assert not (PROJECT_ROOT / "stacks" / "Pulumi.never-deployed-here.yaml").exists()
    assert not (tmp_path / "state").exists()


def test_plan_with_a_yaml_plans_its_stack_and_writes_nothing(tmp_path):
    mine = cluster_yaml(tmp_path, "planned-from-yaml")
    done = run_task("plan", "-c", str(mine), "--format", "json", state=tmp_path / "state")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert (plan["stack"], plan["cluster_file"]) == ("planned-from-yaml", str(mine))
    heads = [r for r in plan["resources"] if r["kind"] == "Instance"]
    assert [r["inputs"]["labels"]["ray-cluster-name"] for r in heads] == ["planned-from-yaml"]
    assert not (PROJECT_ROOT / "stacks" / "Pulumi.planned-from-yaml.yaml").exists()
    assert not (tmp_path / "state").exists()
