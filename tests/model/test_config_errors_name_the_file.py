"""Every config error the program raises names its file: a worker count the stack file's
(`ray-gcp:workerCounts`), an unreadable `auth.ssh_private_key` or a missing file mount the
cluster YAML's, each with its path and the fix."""

from __future__ import annotations

import json

import pytest
import yaml

from model.config import ConfigError
from model.stack_config import PROJECT_ROOT
from ops.review.plan_engine import run_program

FULL = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())


def _error(tmp_path, cluster: dict, **settings: str) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(cluster))
    with pytest.raises(ConfigError) as error:
        run_program({"ray-gcp:cluster": str(path), **settings}, stack="named")
    return str(error.value)


def test_a_worker_count_out_of_range_names_the_stack_file(tmp_path):
    text = _error(tmp_path, FULL, **{"ray-gcp:workerCounts": json.dumps(
        {"ray_worker_small": 99})})
    assert text.startswith("invalid cluster config stacks/Pulumi.named.yaml:")
    assert "ray-gcp:workerCounts.ray_worker_small: 99 is outside" in text
    assert "set a whole number from min_workers" in text


@pytest.mark.parametrize(("edit", "where"), [
    (lambda c, tmp: c["auth"].update(ssh_private_key=str(tmp / "none.pem")),
     "auth.ssh_private_key"),
    (lambda c, tmp: c.update(file_mounts={"~/data": str(tmp / "none")}), "file_mounts.~/data"),
])
def test_a_cluster_error_names_the_cluster_yaml_and_its_path(tmp_path, edit, where):
    cluster = json.loads(json.dumps(FULL))
    edit(cluster, tmp_path)
    text = _error(tmp_path, cluster)
    assert text.startswith(f"invalid cluster config {tmp_path / 'cluster.yaml'}:")
    assert f"  {where}: " in text
