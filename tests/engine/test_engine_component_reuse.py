"""`RayCluster` as a component another Pulumi program uses: a tiny project of its own in a
temp folder (its own Pulumi.yaml and `__main__.py`, nothing of this repository's but the
installed package in the virtualenv it names) runs `pulumi up` through the pulumi CLI and the
language host double, against the fake cloud and the stand-in gcp plugin. The cluster YAML
given as a path and the same YAML given as a dict are the same cluster: no change between
them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_cli import LANGUAGE_HOST_DIR
from tests.support.engine_stack import (
    OPERATION_TIMEOUT_S,
    PROJECT_ROOT,
    EngineWorkspace,
    cluster_nodes,
    require_engine,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]

PROJECT, ZONE = "my-gcp-project", "us-west1-a"
CLUSTER = "reuse"
PROGRAM = '''\
import os

import pulumi
import yaml

from infra.cluster import RayCluster, RayClusterArgs

config = "cluster.yaml"
if os.environ.get("CLUSTER_AS_DICT"):
    with open(config) as stream:
        config = yaml.safe_load(stream)
cluster = RayCluster("ml", RayClusterArgs(config=config))
for name in ("head_name", "head_internal_ip", "bucket_name", "network_name", "subnetwork",
             "service_account_email", "worker_service_account_email", "dashboard_url"):
    pulumi.export(name, getattr(cluster, name))
'''


class Consumer:
    """The other project: `pulumi ...` in its folder on the workspace's backend."""

    def __init__(self, space: EngineWorkspace, folder: Path) -> None:
        self.folder = folder
        self.space = space
        self.pulumi = str(Path(space.env["ENGINE_ROOT"]) / "bin" / "pulumi")
        self.env = {**os.environ, **space.env,
                    "PATH": os.pathsep.join([str(LANGUAGE_HOST_DIR), space.env["PATH"]])}
        self.env.pop("PULUMI_PYTHON_CMD", None)

    def run(self, *args: str, **env: str) -> str:
        done = subprocess.run([self.pulumi, *args, "--non-interactive", "--stack", "dev"],
                              cwd=self.folder, env={**self.env, **env}, capture_output=True,
                              text=True, timeout=OPERATION_TIMEOUT_S)
        if done.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed:\n{done.stdout[-4000:]}\n"
                                 f"{done.stderr[-4000:]}")
        return done.stdout


@pytest.fixture
def consumer(tmp_path: Path) -> Iterator[tuple[Consumer, FakeComputeServer]]:
    folder = tmp_path / "ml-platform"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text(yaml.safe_dump({
        "name": "ml-platform",
        # The virtualenv the package is installed in (this repository's, here).
        "runtime": {"name": "python", "options": {"virtualenv": sys.prefix}},
    }))
    (folder / "__main__.py").write_text(PROGRAM)
    cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/minimal.yaml").read_text())
    (folder / "cluster.yaml").write_text(yaml.safe_dump({**cluster, "cluster_name": CLUSTER}))
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, require_engine(), root=tmp_path / "engine")
        yield Consumer(space, folder), fake


def test_another_program_makes_a_cluster_with_the_component(consumer) -> None:
    project, fake = consumer
    project.run("stack", "init", *project.space.init_options())
    # Without its own preview (the program run twice): the preview below is the one read.
    project.run("up", "--yes", "--skip-preview")

    nodes = cluster_nodes(fake, PROJECT, ZONE, CLUSTER)
    outputs: dict[str, Any] = json.loads(project.run("stack", "output", "--json"))
    assert outputs["head_name"] in nodes
    assert outputs["head_internal_ip"] == nodes[outputs["head_name"]][
        "networkInterfaces"][0]["networkIP"]
    assert outputs["bucket_name"] and outputs["service_account_email"].endswith(
        f"@{PROJECT}.iam.gserviceaccount.com")
    assert outputs["dashboard_url"].startswith("http://localhost:8265")

    deployment = json.loads(project.run("stack", "export"))["deployment"]
    component = "urn:pulumi:dev::ml-platform::ray-gcp:index:RayCluster::ml"
    resources = {r["urn"]: r for r in deployment["resources"]}
    assert resources[component]["outputs"]["head_name"] == outputs["head_name"]
    # Every resource of the cluster is the component's (parented), providers and stack aside.
    own = [r for r in resources.values() if r["type"] not in ("pulumi:pulumi:Stack",)
           and not r["type"].startswith("pulumi:providers:") and r["urn"] != component]
    assert own and all("ray-gcp:index:RayCluster$" in r["urn"] for r in own)

    # The same YAML as a dict: the same cluster, nothing to change.
    preview = json.loads(project.run("preview", "--json", CLUSTER_AS_DICT="1"))
    assert set(preview.get("changeSummary") or {}) == {"same"}, preview.get("changeSummary")

    project.run("destroy", "--yes")
    assert cluster_nodes(fake, PROJECT, ZONE, CLUSTER) == {}
