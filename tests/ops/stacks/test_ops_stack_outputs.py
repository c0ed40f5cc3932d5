"""Stack outputs from the offline file/directory source, and the missing-pulumi message."""

from __future__ import annotations

import json

import pytest

from ops.errors import OpsError
from ops.stacks.stack import load_outputs
from tests.support.sshd_server import stack_outputs_for


def test_head_address_prefers_external_ip(stack):
    outputs = load_outputs()
    assert outputs.head_address == "127.0.0.1" and outputs.stack == "test"
    assert [node.name for node in outputs.workers] == ["ray-local-worker-0001"]


def test_directory_of_outputs_reports_unknown_stack(sshd, tmp_path, monkeypatch):
    (tmp_path / "dev.json").write_text(json.dumps(stack_outputs_for(sshd)))
    monkeypatch.setenv("RAY_GCP_STACK_OUTPUTS", str(tmp_path))
    monkeypatch.delenv("PULUMI_STACK", raising=False)
    assert load_outputs("dev").stack == "dev"
    with pytest.raises(OpsError, match="no such stack 'prod'.*stacks are dev"):
        load_outputs("prod")


def test_undeployed_stack_says_to_run_up(sshd, tmp_path, monkeypatch):
    (tmp_path / "new.json").write_text("{}")
    monkeypatch.setenv("RAY_GCP_STACK_OUTPUTS", str(tmp_path / "new.json"))
    with pytest.raises(OpsError, match="invoke up --stack new"):
        load_outputs("new")


def test_missing_pulumi_cli_is_one_line_with_install_hint(stack, tmp_path):
    result = stack.invoke("up", "-s", "full", env={**stack.env, "PATH": "/nonexistent",
                                                   "XDG_CACHE_HOME": str(tmp_path)})
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pulumi CLI is not on PATH" in lines[0]
    assert "get.pulumi.com" in lines[0] and "invoke engine" in lines[0]
