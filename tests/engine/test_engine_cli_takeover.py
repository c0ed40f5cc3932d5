"""`pulumi up` (the CLI, through the language host double) and `invoke up` (the Automation
API, the program inline) make the same stack state, and either takes over a stack the other
deployed: a preview with one after an up with the other has nothing to change."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_cli import CliProject
from tests.support.engine_stack import EngineWorkspace

# Writes or compares the checkout's stacks/ folder (EngineWorkspace.repo_stack, the stack files a
# refused up must not leave): one worker runs every such test (tests/conftest.py's groups).
pytestmark = pytest.mark.xdist_group("checkout-stacks")

STACK = "engine-cli-takeover"
CONFIG = {"ray-gcp:cluster": "stacks/clusters/minimal.yaml"}
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # pulumi's marker of a secret value


@pytest.fixture
def both(engine_bin: Path, tmp_path) -> Iterator[tuple[EngineWorkspace, CliProject]]:
    bin_dir = engine_bin
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir, root=tmp_path)
        with space.repo_stack(STACK, CONFIG) as stack_file:
            cli = CliProject(space)
            # One stack, one settings file: the CLI's copy gets the repo's (its salt too).
            shutil.copy(stack_file, cli.folder / "stacks" / stack_file.name)
            yield space, cli


DYNAMIC_PROVIDER = "pulumi:providers:pulumi-python"


def masked(value: Any) -> Any:
    """An input with each secret's ciphertext (fresh per encryption) left out."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG) == "1b47061264138c4ac30d75fd1eb44270":
            return "[secret]"
        return {k: masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def state(cli: CliProject) -> dict[str, tuple[Any, Any]]:
    """URN -> (parent, inputs) of every resource the stack holds, providers' too. The dynamic
    providers' default provider records the stack's config, where `ray-gcp:cluster` names the
    same YAML two ways: invoke runs the engine on its copy of the stack file, which makes the
    path absolute (ops.stacks.stack), the CLI on the tracked file, relative to the project."""
    return {r["urn"]: (r.get("parent"), masked(
        {key: value for key, value in (r.get("inputs") or {}).items()
         if not (r["type"] == DYNAMIC_PROVIDER and key == "ray-gcp:cluster")}))
            for r in cli.export(STACK)["resources"]}


def invoke_changes(space: EngineWorkspace) -> str:
    done = space.invoke("preview", "-s", STACK)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (summary,) = re.findall(r"^summary: (.*) in [\d.]+s$", done.stdout, re.M)
    return summary


def test_pulumi_up_and_invoke_up_make_the_same_state_and_take_over(both) -> None:
    space, cli = both
    done = space.invoke("up", "-s", STACK)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    by_invoke = state(cli)
    # The CLI on the stack invoke deployed: nothing to change.
    assert set(cli.preview_changes(STACK)) == {"same"}

    # An up through the CLI records the inputs its run of the program gives (a `same` step
    # keeps the new inputs): the ones invoke's inline run gave.
    cli.run("up", "--yes", "--stack", STACK)
    by_cli = state(cli)
    assert sorted(by_cli) == sorted(by_invoke)  # same URNs
    differ = {urn: sorted(key for key in {**by_invoke[urn][1], **by_cli[urn][1]}
                          if by_invoke[urn][1].get(key) != by_cli[urn][1].get(key))
              for urn in by_cli if by_cli[urn] != by_invoke[urn]}
    assert differ == {}
    # invoke on the stack the CLI last deployed: nothing to change.
    assert re.fullmatch(r"\d+ same", invoke_changes(space))
