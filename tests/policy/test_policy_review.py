"""`invoke diff` judges the working tree's plan with the stack's pack config: a stack that
breaks three policies gets the three listed beside the diff, and the mandatory ones fail it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from model.stack_config import PROJECT_ROOT
from ops.errors import OpsError
from ops.review.guardrails import Finding, refuse_mandatory
from ops.review.plan_base import diff_stack

# Three rules a platform team switched on that full.yaml (n1, external IPs, no KMS key on its
# boot disks) breaks; two of the defaults it also breaks are turned off to keep the list short.
PACK_CONFIG = {
    "allowed-machines": {"families": ["n2", "e2"]},
    "private-nodes": {"required": True},
    "boot-disk-cmek": {"enforcementLevel": "advisory", "required": True},
    "cost-labels": "disabled",
    "no-open-admin-ports": "disabled",
}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                   check=True, capture_output=True)


@pytest.fixture(scope="module")
def strict_stack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout whose stack `strict` is full.yaml judged with PACK_CONFIG."""
    root = tmp_path_factory.mktemp("checkout")
    (root / "stacks/clusters").mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "stacks/clusters/full.yaml", root / "stacks/clusters/full.yaml")
    (root / "guardrails.json").write_text(json.dumps(PACK_CONFIG))
    (root / "stacks/Pulumi.strict.yaml").write_text(yaml.safe_dump({"config": {
        "ray-gcp:cluster": "stacks/clusters/full.yaml",
        "ray-gcp:policyConfig": "guardrails.json"}}))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "strict stack")
    return root


@pytest.fixture(scope="module")
def strict_diff(strict_stack: Path) -> tuple[str, list[Finding]]:
    """`invoke diff`'s markdown and findings for `strict` against HEAD (two plan
    interpreters), made once for the tests that read them."""
    return diff_stack("strict", "HEAD", root=strict_stack)


@pytest.mark.slow  # the diff's two plan interpreters, ~6 CPU-s
def test_diff_lists_the_three_broken_policies_beside_the_diff(
    strict_diff: tuple[str, list[Finding]],
):
    markdown, findings = strict_diff

    assert {f["policy"] for f in findings} == {"allowed-machines", "private-nodes",
                                              "boot-disk-cmek"}
    section = markdown.split("#### Guardrails:")[1]
    for policy in ("allowed-machines", "private-nodes", "boot-disk-cmek"):
        assert f"`{policy}`" in section
    assert "No resource changes." in markdown, "the plan is the same on both sides"


@pytest.mark.slow  # the diff's two plan interpreters, ~6 CPU-s
def test_a_mandatory_violation_fails_the_diff_and_an_advisory_one_does_not(
    strict_diff: tuple[str, list[Finding]],
):
    _, findings = strict_diff
    with pytest.raises(OpsError) as refused:
        refuse_mandatory("strict", findings)
    assert "allowed-machines, private-nodes" in str(refused.value)
    assert "boot-disk-cmek" not in str(refused.value), "advisory here"
    refuse_mandatory("strict", [f for f in findings if f["level"] == "advisory"])


def test_plan_table_prints_the_violations(strict_stack: Path):
    result = subprocess.run(
        [str(Path(sys.executable).parent / "invoke"), "plan", "-s", "strict", "--format",
         "table", "--root", str(strict_stack)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "policy: " in result.stdout and "MANDATORY  private-nodes" in result.stdout


def test_an_unknown_policy_in_the_pack_config_is_one_line_naming_the_file(tmp_path: Path):
    from ops.review.guardrails import pack_config

    (tmp_path / "p.json").write_text(json.dumps({"open-ports": "mandatory"}))
    with pytest.raises(OpsError, match=r"p.json: unknown policy 'open-ports' \(known: "):
        pack_config({"ray-gcp:policyConfig": "p.json"}, tmp_path)


def test_the_docs_guardrails_table_gives_each_policys_level_and_parameters():
    from policy.rules import RULES
    from tests.support.docs_pages import section, table_rows

    header, *cells = table_rows(section("guardrails.md", "## The policies"))
    assert header[:3] == ["Policy", "Default level", "Parameters (default)"]
    rows = {row[0].strip("`"): row for row in cells}
    assert sorted(rows) == sorted(rule.name for rule in RULES)
    for rule in RULES:
        _, level, params, *_ = rows[rule.name]
        assert level == rule.level, rule.name
        assert all(f"`{name}`" in params for name in rule.params), rule.name


def test_up_and_preview_name_the_pack_and_the_stacks_pack_config():
    from ops.lifecycle.pulumi_cli import policy_options

    options = policy_options({"ray-gcp:policyConfig": "stacks/guardrails.json"})
    (pack,) = options["policy_packs"]
    # An executable the engine starts itself (no language host), PulumiPolicy.yaml beside it.
    assert os.access(pack, os.X_OK) and Path(pack).is_file()
    assert (Path(pack).parent / "PulumiPolicy.yaml").is_file()
    assert (Path(pack).parent / "__main__.py").is_file()
    assert options["policy_pack_configs"] == [str(PROJECT_ROOT / "stacks/guardrails.json")]
    assert policy_options({"ray-gcp:cluster": "stacks/clusters/full.yaml"}) == {}


def test_the_up_passes_the_policy_pack_on_to_the_automation_api():
    import io
    from types import SimpleNamespace

    from ops.lifecycle.preempted import up_replacing_reclaimed

    class NoSlicesStack:
        """The Automation API calls `invoke up` makes, on a state without TPU slices."""

        up_kwargs: dict[str, object] = {}

        def refresh(self, *, on_event: object) -> None:
            pass

        def export_stack(self) -> SimpleNamespace:
            return SimpleNamespace(deployment={"resources": []})

        def get_all_config(self) -> dict[str, SimpleNamespace]:
            return {}

        def up(self, **kwargs: object) -> SimpleNamespace:
            self.up_kwargs = kwargs
            return SimpleNamespace(outputs={})  # an UpResult with no outputs

    stack = NoSlicesStack()
    options = {"policy_packs": ["policy"], "policy_pack_configs": ["p.json"]}
    up_replacing_reclaimed(stack, print, io.StringIO(), up_options=options)
    assert {k: stack.up_kwargs[k] for k in options} == options
