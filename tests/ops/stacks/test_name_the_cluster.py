"""Name the cluster, or be asked (issue 43): with no -s/-c a task takes the project folder's
only stack, else refuses listing them (never pulumi's selected stack); a deletion is said and
asked first, `-y` skips, and no terminal without `-y` refuses; a stack file git tracks is never
written: the engine works on a copy in the state folder that keeps its salt and counts."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import yaml

import ops.stacks.stack
from ops.confirm import confirm
from ops.errors import OpsError
from ops.stacks.stack import engine_workspace, only_stack

CLUSTER_YAML = """
cluster_name: mine
provider: {type: gcp, region: us-west1, availability_zone: us-west1-a, project_id: p}
auth: {ssh_user: ubuntu}
available_node_types:
  head: {resources: {}, node_config: {machineType: n1-standard-2}}
  small: {min_workers: 0, max_workers: 3, resources: {}, node_config: {machineType: n1-standard-2}}
head_node_type: head
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with no tracked stacks (as outside a checkout) and its state folder."""
    monkeypatch.setattr(ops.stacks.stack, "STACKS_DIR", tmp_path / "tracked")
    (tmp_path / "tracked").mkdir()
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("PULUMI_STACK", raising=False)
    (tmp_path / "cluster.yaml").write_text(CLUSTER_YAML)
    return tmp_path


def own_stack(folder: Path, name: str) -> Path:
    path = folder / "state" / "stacks" / f"Pulumi.{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"config": {"ray-gcp:cluster": str(folder / "cluster.yaml")}}))
    return path


def test_no_stack_named_takes_the_folders_only_stack(folder):
    own_stack(folder, "mine")
    assert only_stack() == "mine"
    assert ops.stacks.stack.Stack.choose(None).name == "mine"


def test_no_stack_named_with_several_refuses_listing_them_in_one_line(folder):
    own_stack(folder, "mine")
    (folder / "tracked" / "Pulumi.full.yaml").write_text("config: {}\n")
    with pytest.raises(OpsError) as refused:
        only_stack()
    assert str(refused.value) == ("which cluster? this folder has 2: full, mine: name one with "
                                  "`-s NAME` (or `-c CLUSTER.yaml`)")


def test_no_stack_at_all_says_how_to_make_one(folder):
    with pytest.raises(OpsError, match="no cluster here: `-c CLUSTER.yaml` names one"):
        only_stack()


def test_a_deletion_is_said_then_asked(capsys):
    asked: list[str] = []
    with pytest.raises(OpsError, match="aborted: nothing was deleted"):
        confirm("stack 'x': the cluster will be deleted", False,
                lambda prompt: asked.append(prompt) or "n")
    assert asked == ["Continue? [y/N]: "]
    confirm("again", False, lambda prompt: "y")
    confirm("and with -y", True, lambda prompt: pytest.fail("asked despite -y"))
    assert capsys.readouterr().out.splitlines() == [
        "stack 'x': the cluster will be deleted", "again", "and with -y"]


def test_no_terminal_and_no_yes_refuses_in_one_line(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # piped: not a terminal
    with pytest.raises(OpsError) as refused:
        confirm("stack 'x': the cluster will be deleted", False, out=io.StringIO())
    assert str(refused.value) == ("nothing deleted: no terminal to ask on; add -y (--yes) to "
                                  "go ahead without the question")


def test_the_engine_works_on_a_copy_of_a_tracked_stack_file(folder):
    tracked = folder / "tracked" / "Pulumi.full.yaml"
    tracked.write_text(yaml.safe_dump({"config": {"ray-gcp:cluster": "cluster.yaml",
                                                  "gcp:project": "p"}}))
    before = tracked.read_bytes()
    copy = folder / "state" / "stacks" / "Pulumi.full.yaml"
    copy.parent.mkdir(parents=True)
    copy.write_text(yaml.safe_dump({"encryptionsalt": "v1:salt", "config": {
        "ray-gcp:cluster": "stale.yaml", "ray-gcp:workerCounts": {"small": 2},
        "ray-gcp:secret": {"secure": "v1:abc"}, "gcp:project": "old"}}))

    assert engine_workspace("full") == folder / "state"
    written = yaml.safe_load(copy.read_text())
    assert written["encryptionsalt"] == "v1:salt"
    assert written["config"] == {
        "ray-gcp:cluster": str(ops.stacks.stack.PROJECT_ROOT / "cluster.yaml"),  # absolute
        "gcp:project": "p",  # the tracked file's value
        "ray-gcp:workerCounts": {"small": 2}, "ray-gcp:secret": {"secure": "v1:abc"}}
    assert yaml.safe_load((folder / "state" / "Pulumi.yaml").read_text())[
        "stackConfigDir"] == "stacks"
    assert tracked.read_bytes() == before


def test_a_day_two_task_takes_the_cluster_yaml_as_its_stack(folder):
    from invoke.exceptions import Exit

    import tasks

    yaml_path = str(folder / "cluster.yaml")
    with pytest.raises(Exit, match="no stack deploys it yet .stack 'mine'.: `up -c"):
        tasks._named(None, yaml_path)
    own_stack(folder, "mine")
    assert tasks._named(None, yaml_path) == "mine"
    assert tasks._named("other", None) == "other"
    with pytest.raises(Exit, match="both choose the stack"):
        tasks._named("mine", yaml_path)


def test_scaling_to_fewer_workers_is_said_and_asked_first(folder, monkeypatch, capsys):
    import ops.lifecycle.scale as scale_module

    path = own_stack(folder, "mine")
    path.write_text(yaml.safe_dump({"config": {"ray-gcp:cluster": str(folder / "cluster.yaml"),
                                               "ray-gcp:workerCounts": {"small": 2}}}))
    before = path.read_text()
    monkeypatch.setattr(scale_module, "require_cli", lambda: None)  # no engine needed to refuse
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # piped: no terminal to ask on
    with pytest.raises(OpsError, match="nothing deleted: no terminal to ask on"):
        scale_module.scale("mine", "small", "1")
    assert capsys.readouterr().out == ("stack 'mine': cluster 'mine' in project p, zone "
                                       "us-west1-a: 1 small worker(s) will be deleted (2 -> 1)\n")
    assert path.read_text() == before
