"""`invoke plan` output: canonical (byte-identical for the same input, whatever the YAML's key
order), Pulumi type tokens, worker groups labelled, and no secret ever in the text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.ssh_keys import generate_key_pair
from model.stack_config import PROJECT_ROOT
from ops.review.plan import plan_stack, plan_stack_isolated, render_json, render_table

FULL_YAML = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
CREDENTIAL_MARKER = "credential-marker-must-not-leak"


def write_stack(root: Path, cluster: dict[str, Any], sort_keys: bool = False) -> None:
    (root / "stacks/clusters").mkdir(parents=True, exist_ok=True)
    (root / "stacks/clusters/s.yaml").write_text(yaml.safe_dump(cluster, sort_keys=sort_keys))
    (root / "stacks/Pulumi.s.yaml").write_text(
        yaml.safe_dump({"config": {"ray-gcp:cluster": "stacks/clusters/s.yaml"}})
    )


def reversed_keys(value: Any) -> Any:
    """The same YAML with every mapping's keys in reverse order."""
    if isinstance(value, dict):
        return {key: reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(item) for item in value]
    return value


def plan_texts(roots: list[Path]) -> list[str]:
    """Raw stdout of `python -m ops.review.plan` for each root, planned concurrently."""
    running = [plan_stack_isolated("s", root) for root in roots]
    texts = []
    for process in running:
        stdout, stderr = process.communicate()
        assert process.returncode == 0, stderr
        texts.append(stdout)
    return texts


@pytest.fixture(scope="module")
def key_pair() -> tuple[str, str]:
    return generate_key_pair()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory, key_pair: tuple[str, str]) -> dict:
    """Plans of: full.yaml twice, each by `python -m ops.review.plan` in its own interpreter
    (byte-identical across runs), then in this process, by the function that interpreter runs
    and the text it prints, full.yaml with keys reordered, and with credentials."""
    roots = {name: tmp_path_factory.mktemp(name)
             for name in ("first", "second", "reordered", "secrets")}
    write_stack(roots["first"], FULL_YAML)
    write_stack(roots["second"], FULL_YAML)
    write_stack(roots["reordered"], reversed_keys(FULL_YAML), sort_keys=False)
    key_file = roots["secrets"] / "id_rsa"
    key_file.write_text(key_pair[0])
    with_secrets = {
        **FULL_YAML,
        "auth": {**FULL_YAML["auth"], "ssh_private_key": str(key_file)},
        "provider": {**FULL_YAML["provider"], "gcp_credentials": {
            "type": "service_account",
            "credentials": {"client_email": "sa@p.iam.gserviceaccount.com",
                            "private_key": CREDENTIAL_MARKER},
        }},
    }
    write_stack(roots["secrets"], with_secrets)
    texts = dict(zip(("first", "second"), plan_texts([roots["first"], roots["second"]]),
                     strict=True))
    return {**texts, **{name: render_json(plan_stack("s", roots[name]))
                        for name in ("reordered", "secrets")}}


@pytest.mark.slow  # the module's plan processes, ~7 CPU-s
def test_two_runs_are_byte_identical(outputs: dict[str, str]) -> None:
    assert outputs["first"] == outputs["second"]


@pytest.mark.slow  # the module's plan processes, ~7 CPU-s
def test_yaml_key_order_does_not_change_the_plan(outputs: dict[str, str]) -> None:
    assert outputs["reordered"] == outputs["first"]


@pytest.mark.slow  # the module's plan processes, ~7 CPU-s
def test_resources_carry_pulumi_type_tokens_and_worker_groups_are_labelled(
    outputs: dict[str, str],
) -> None:
    plan = json.loads(outputs["first"])
    types = {r["type"] for r in plan["resources"]}
    assert "gcp:compute/instance:Instance" in types
    groups = [r for r in plan["resources"] if r["kind"] == "WorkerGroup"]
    workers = {n for n, t in FULL_YAML["available_node_types"].items()
               if n != FULL_YAML["head_node_type"]}
    assert {g["inputs"]["node_type"] for g in groups} == workers
    assert {g["type"] for g in groups} == {"pulumi-python:dynamic/ray-gcp:WorkerGroup"}
    assert all("__provider" not in r["inputs"] for r in plan["resources"])


@pytest.mark.slow  # the module's plan processes, ~7 CPU-s
def test_table_lists_every_resource(outputs: dict[str, str]) -> None:
    plan = json.loads(outputs["first"])
    table = render_table(plan)
    for resource in plan["resources"]:
        assert resource["name"] in table and resource["type"] in table


@pytest.mark.slow  # the module's plan processes, ~7 CPU-s
def test_private_key_and_gcp_credentials_never_appear(
    outputs: dict[str, str], key_pair: tuple[str, str]
) -> None:
    text = outputs["secrets"]
    table = render_table(json.loads(text))
    private_lines = [line for line in key_pair[0].splitlines()
                     if line and not line.startswith("-----")]
    for shown in (text, table):
        assert CREDENTIAL_MARKER not in shown
        assert not any(line in shown for line in private_lines)
    assert "[secret]" in text
    assert key_pair[1].split()[1] in text, "the public key is not secret and should show"


def test_many_plans_in_one_process_leave_the_pickler_unwrapped():
    """Pulumi wraps the pickler once per dynamic resource and never unwraps it; a few hundred
    plans in one process (a benchmark, the mutation test) then end in RecursionError."""
    import pickle

    from infra.dynamic_types import WORKER_GROUP_TYPE
    from ops.review.plan_engine import run_program

    before = pickle._Pickler.__dict__["_batch_setitems"]
    for _ in range(2):
        run = run_program({"ray-gcp:cluster": "stacks/clusters/full.yaml"}, stack="repeat")
        assert run.of_type(WORKER_GROUP_TYPE)  # pickled dynamic providers
    assert pickle._Pickler.__dict__["_batch_setitems"] is before
