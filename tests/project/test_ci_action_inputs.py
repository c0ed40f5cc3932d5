"""What .github/workflows/preview.yml passes to the actions it pins is what those actions read:
every `with:` key is an input of the action at the pinned commit, a boolean input gets true or
false, a choice one of its values (tests/project/action_inputs.yaml, the inputs read from each
action's action.yml at that commit; GitHub only warns of an unknown input, and the action
ignores it). The workflow never ran on GitHub: this is what can be checked here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.engine_stack import PROJECT_ROOT

WORKFLOWS = sorted((PROJECT_ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONS: dict[str, dict[str, Any]] = yaml.safe_load(
    (Path(__file__).with_name("action_inputs.yaml")).read_text())


def _steps(action: str) -> list[tuple[str, dict[str, Any]]]:
    """(the pinned ref, `with:`) of each step of every workflow that uses `action`."""
    found = []
    for workflow in WORKFLOWS:
        for job in yaml.safe_load(workflow.read_text())["jobs"].values():
            for step in job.get("steps") or []:
                name, _, ref = str(step.get("uses", "")).partition("@")
                if name == action:
                    found.append((ref, dict(step.get("with") or {})))
    return found


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_the_workflow_passes_only_what_the_pinned_action_reads(action: str) -> None:
    known = ACTIONS[action]
    steps = _steps(action)
    assert steps, f"no workflow uses {action}"
    for ref, given in steps:
        assert ref == known["commit"], (
            f"{action}@{ref}: pinned elsewhere than tests/project/action_inputs.yaml read it: "
            "refresh that file from the new commit's action.yml")
        assert set(given) - set(known["inputs"]) == set(), action
        for name in set(given) & set(known["booleans"]):
            assert isinstance(given[name], bool) or "${{" in str(given[name]), (name, given)
        for name, values in known["choices"].items():
            if name in given:
                assert given[name] in values, (name, given[name])


def test_the_pulumi_preview_gives_what_pulumi_actions_requires() -> None:
    """src/config.ts reads `command` and `stack-name` as required; `preview` with a comment
    needs the token the comment is posted with."""
    ((_, given),) = _steps("pulumi/actions")
    assert given["command"] == "preview" and given["stack-name"]
    assert given["comment-on-pr"] is True and given["github-token"]


def test_google_auth_is_workload_identity_federation_without_a_key() -> None:
    for _, given in _steps("google-github-actions/auth"):
        assert given.get("workload_identity_provider") and given.get("service_account")
        assert "credentials_json" not in given
