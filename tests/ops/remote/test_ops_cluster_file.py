"""The day-two tasks read the cluster YAML a stack was deployed from; when it is gone or
broken, the message names it, the stack output that named it, and the fix."""

from __future__ import annotations

import pytest

from ops.errors import OpsError
from ops.remote.cluster_file import sync_rules
from ops.stacks.stack import parse_outputs


def outputs(cluster_file: str):
    return parse_outputs("demo", {"cluster_name": "demo", "head_name": "h",
                                  "head_internal_ip": "10.0.0.2", "ssh_user": "ubuntu",
                                  "ssh_private_key": "k", "cluster_config_file": cluster_file})


def test_a_missing_cluster_yaml_names_the_file_and_the_output(tmp_path):
    missing = tmp_path / "gone.yaml"
    with pytest.raises(OpsError) as raised:
        sync_rules(outputs(str(missing)))
    assert str(missing) in str(raised.value)
    assert "output cluster_config_file" in str(raised.value)


def test_a_broken_cluster_yaml_names_the_stack_and_where_it_breaks(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("cluster_name: [demo\n")
    with pytest.raises(OpsError) as raised:
        sync_rules(outputs(str(broken)))
    assert "stack 'demo'" in str(raised.value)
    assert f"{broken}: not valid YAML at line 2" in str(raised.value)
