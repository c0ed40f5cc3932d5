"""`invoke diff` shows a changed startup script as a unified diff of the YAML commands it runs,
each under its stage, not as a line count; file_mounts appear only as their archive's hash."""

from __future__ import annotations

from bootstrap.startup_script import render_startup_script
from ops.review.command_diff import command_diff, script_commands
from ops.review.plan_diff import diff_plans
from ops.review.plan_markdown import render_markdown
from tests.support.bootstrap_stubs import cluster


def _script(**overrides) -> str:
    return render_startup_script(cluster(**overrides), "head", "head_t")


def _plan(script: str) -> dict:
    head = {"type": "gcp:compute/instance:Instance", "kind": "Instance", "name": "head",
            "parent": "stubbed", "custom": True,
            "inputs": {"labels": {"ray-node-type": "head", "ray-user-node-type": "head_t"},
                       "metadata": {"startup-script": script}}}
    return {"resources": [head]}


def test_commands_come_back_as_written_under_their_stage():
    script = _script(setup_commands=["echo 'quoted' \"twice\" $HOME"])
    assert "[setup] echo 'quoted' \"twice\" $HOME" in script_commands(script)
    assert script_commands(script)[0] == "[initialization] record init-1"


def test_a_setup_edit_is_a_unified_diff_of_the_commands_in_the_markdown():
    old = _script()
    new = _script(setup_commands=["record setup-common", "pip install -q tqdm"],
                  head_setup_commands=[])
    assert command_diff(old, new) == [
        "@@ -2,3 +2,3 @@", " [setup] record setup-common", "-[setup] record setup-head",
        "+[setup] pip install -q tqdm", " [ray-start] ray start --head --port=6379"]
    markdown = render_markdown(diff_plans(_plan(old), _plan(new)), "s", "`main`", "working",
                               0)
    assert "    ```diff\n    @@ -2,3 +2,3 @@\n" in markdown
    assert "    +[setup] pip install -q tqdm\n" in markdown
    assert "    -[setup] record setup-head\n" in markdown


def test_the_same_commands_give_no_command_diff():
    assert command_diff(_script(), _script(file_mounts={})) == []
