"""Install once, run from your own folder (issue 43): the wheel `uv build` makes, installed into a
fresh virtualenv outside the repository, gives a `ray-gcp` command that plans, creates, shows
and deletes a cluster from a temp project folder against the fake cloud, through the real
pulumi engine. Relative file_mounts resolve from that folder (as `ray up` resolves them), the
stacks and state live in its `.ray-gcp/`, nothing is written to the repository or the installed
tool, and a bare `down` without a terminal refuses before it deletes anything.

The fresh virtualenv gets the wheel alone (`--no-deps`, offline) and reaches its dependencies
through a .pth naming this environment's site-packages (the lock's packages, no network): the
tool's own code, data files and entry point come from the wheel only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import PROJECT_ROOT, EngineWorkspace, cluster_nodes

# Writes or compares the checkout's stacks/ folder (EngineWorkspace.repo_stack, the stack files a
# refused up must not leave): one worker runs every such test (tests/conftest.py's groups).
pytestmark = pytest.mark.xdist_group("checkout-stacks")

CLUSTER = "my-own-cluster"
PROJECT, ZONE = "my-gcp-project", "us-west1-a"
USERS_OWN = ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE",
             "RAY_GCP_SECRETS_PROVIDER",
             "RAY_GCP_STATE_DIR", "PULUMI_STACK", "VIRTUAL_ENV", "PYTHONPATH")


def tracked_changes() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--",
                           "stacks", "Pulumi.yaml"], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, check=True).stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ray-gcp` from the wheel, in a virtualenv of its own outside the repository."""
    root = tmp_path_factory.mktemp("installed")
    uv = str(PROJECT_ROOT / "uv")
    subprocess.run([uv, "build", "--wheel", "--offline", "--out-dir", str(root / "dist")],
                   cwd=PROJECT_ROOT, check=True, capture_output=True, timeout=600)
    wheel = next((root / "dist").glob("ray_gcp_pulumi-*.whl"))
    venv = root / "tool"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True,
                   capture_output=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([uv, "pip", "install", "-q", "--offline", "--no-deps", "--python",
                    str(python), str(wheel)], check=True, capture_output=True, timeout=300)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "locked-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


@pytest.fixture
def user(engine_bin: Path, installed: Path,
         tmp_path: Path) -> Iterator[tuple[dict[str, str], FakeComputeServer, Path]]:
    """A user's own project folder (a cluster YAML with a relative file mount, the folder it
    names), their environment with nothing set up for pulumi, and the fake cloud."""
    bin_dir = engine_bin
    folder = tmp_path / "my-project"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "train.csv").write_text("a,b\n1,2\n")
    cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/minimal.yaml").read_text())
    cluster["cluster_name"] = CLUSTER
    cluster["file_mounts"] = {"/home/ubuntu/data": "data"}
    (folder / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir, root=tmp_path / "engine")
        env = {key: value for key, value in {**os.environ, **space.env}.items()
               if key not in USERS_OWN}
        env["PATH"] = os.pathsep.join([str(installed / "bin"), env["PATH"]])
        yield env, fake, folder


def ray_gcp(env: dict[str, str], folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ray-gcp", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=900, stdin=subprocess.DEVNULL)


def succeeded(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done.stdout + done.stderr


@pytest.mark.slow  # over 60 s on the loaded 2-core machine
def test_the_installed_command_runs_a_cluster_from_the_users_own_folder(installed, user):
    env, fake, folder = user
    before = tracked_changes()
    tool = subprocess.run([str(installed / "bin" / "python"), "-c",
                           "import infra, tasks; print(infra.__file__, tasks.__file__)"],
                          cwd=folder, env=env, capture_output=True, text=True, check=True)
    assert str(PROJECT_ROOT) not in tool.stdout  # the tool's code is the wheel's

    succeeded(ray_gcp(env, folder, "plan", "-c", "cluster.yaml"))
    succeeded(ray_gcp(env, folder, "up", "-c", "cluster.yaml"))
    state = folder / ".ray-gcp"
    assert (state / ".gitignore").read_text().splitlines()[-1] == "*"  # never in the user's git
    stack_file = yaml.safe_load((state / "stacks" / f"Pulumi.{CLUSTER}.yaml").read_text())
    assert stack_file["config"]["ray-gcp:cluster"] == str(folder / "cluster.yaml")
    nodes = cluster_nodes(fake, PROJECT, ZONE, CLUSTER)
    assert [node["labels"].get("ray-node-type") for node in nodes.values()] == ["head"]
    # The relative mount is the project folder's `data/`, as `ray up` reads it.
    archive = next((state / "file-mounts" / CLUSTER).glob("*.tar.gz"))
    with tarfile.open(archive) as mounts:
        assert any(name.endswith("train.csv") for name in mounts.getnames())

    # No stack named: the folder's only one.
    succeeded(ray_gcp(env, folder, "plan", "-o", "plan.json"))
    assert json.loads((folder / "plan.json").read_text())["stack"] == CLUSTER
    assert succeeded(ray_gcp(env, folder, "get-head-ip")).strip()
    status = ray_gcp(env, folder, "status")  # the fake head has no sshd: the table only
    assert f"ray-{CLUSTER}-head-" in status.stdout

    refused = ray_gcp(env, folder, "down")
    assert refused.returncode == 1
    assert refused.stderr == ("error: nothing deleted: no terminal to ask on; add -y (--yes) "
                              "to go ahead without the question\n")
    said = refused.stdout
    assert f"cluster {CLUSTER!r} in project {PROJECT}, zone {ZONE}: the cluster will be " \
        "deleted: 1 node(s)" in said
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == nodes

    succeeded(ray_gcp(env, folder, "down", "-y"))
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}
    assert tracked_changes() == before
    assert not list(installed.rglob(".ray-gcp"))
