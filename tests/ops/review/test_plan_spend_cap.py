"""`provider.spend_cap` in the review: `invoke plan` and `invoke diff` show the cluster's price
per hour against the cap, and the hours the total cap lasts; a plan whose pinned nodes alone
cost more an hour than the cap is refused by `invoke plan`, `invoke diff` and `invoke up` (before
the engine runs) with one line naming the file, the YAML path, the projection, the cap and the
fix; a cluster that only max_workers would take over the cap is a warning.

The tasks run through invoke's own command-line parsing (tests/support/task_runner.py) in a git copy
of the project whose stacks are edits of full.yaml. The expected prices are computed here from
the price table itself (below), not read from the code under test.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[3]
RUNNER = PROJECT_ROOT / "tests" / "support" / "task_runner.py"
FULL = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/full.yaml").read_text())
TABLE = yaml.safe_load((PROJECT_ROOT / "model/price_table.yaml").read_text())


def n1_standard(vcpus: int, spot: bool) -> float:
    """An n1-standard machine: vCPUs x the vCPU rate + 3.75 GiB a vCPU x the GiB rate."""
    rates = TABLE["machine_families"]["n1"]
    prefix = "spot_" if spot else ""
    gib = vcpus * TABLE["machine_shapes"]["n1-standard"]
    return vcpus * rates[f"{prefix}vcpu"] + gib * rates[f"{prefix}gib"]


# full.yaml's nodes in us-west1 (factor 1.0), each with a 50 GB pd-standard boot disk:
#   disk  = 50 x 0.04 / 730                               = 0.00274 $/h
#   HEAD  = n1-standard-2 on demand: 2 x 0.031611 + 7.5 x 0.004237 + disk = 0.09774
#   SMALL = n1-standard-2 preemptible: 2 x 0.00698 + 7.5 x 0.000936 + disk = 0.02372
#   GPU   = n1-standard-4 on demand + 1 T4: 4 x 0.031611 + 15 x 0.004237 + 0.35 + disk = 0.54274
FACTOR = TABLE["region_factors"][FULL["provider"]["region"]]
DISK = 50 * TABLE["disks"]["pd-standard"] / TABLE["hours_per_month"]
HEAD = (n1_standard(2, spot=False) + DISK) * FACTOR
SMALL = (n1_standard(2, spot=True) + DISK) * FACTOR
GPU = (n1_standard(4, spot=False) + TABLE["gpus"]["nvidia-tesla-t4"]["on_demand"] + DISK) * FACTOR
GPU_TYPE = {
    "min_workers": 1, "max_workers": 1, "resources": {"CPU": 4, "GPU": 1},
    "node_config": {
        "machineType": "n1-standard-4",
        "guestAccelerators": [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 1}],
        "scheduling": [{"onHostMaintenance": "TERMINATE"}],
        "disks": FULL["available_node_types"]["ray_worker_small"]["node_config"]["disks"],
    },
}


def capped(spend_cap: dict[str, Any], gpu_workers: int | None = None) -> dict[str, Any]:
    """full.yaml (max_workers 2; 1 to 2 ray_worker_small) with the cap, and with a T4 type
    of at most 1 worker, `gpu_workers` of them pinned."""
    cluster = copy.deepcopy(FULL)
    cluster["provider"]["spend_cap"] = spend_cap
    if gpu_workers is not None:
        cluster["available_node_types"]["ray_worker_gpu"] = {**GPU_TYPE,
                                                             "min_workers": gpu_workers}
    return cluster


STACKS = {
    "within": capped({"max_usd_per_hour": 1.0, "max_usd_total": 300, "action": "down"}),
    "maxonly": capped({"max_usd_per_hour": 0.5}, gpu_workers=0),
    "over": capped({"max_usd_per_hour": 0.5}, gpu_workers=1),
    "capchange": capped({"max_usd_per_hour": 1.0}),
}
# A cluster YAML no stack deploys yet, for `invoke up -c`.
OVER_YAML = {**STACKS["over"], "cluster_name": "overyaml"}
# What the working tree changes after the commit `invoke diff --base HEAD` compares with.
CAP_CHANGE = {"max_usd_per_hour": 0.13, "max_usd_total": 100}

COMMANDS = {
    "within_table": ["plan", "-s", "within", "--format", "table"],
    "within_json": ["plan", "-s", "within", "--json"],
    "maxonly_table": ["plan", "-s", "maxonly", "--format", "table"],
    "over_plan": ["plan", "-s", "over", "--format", "table"],
    "over_up": ["up", "-s", "over"],
    "over_up_yaml": ["up", "-c", "stacks/clusters/overyaml.yaml"],
    "over_diff": ["diff", "-s", "over", "--base", "HEAD"],
    "capchange_diff": ["diff", "-s", "capchange", "--base", "HEAD"],
}


def write_stack(root: Path, name: str, cluster: dict[str, Any]) -> None:
    (root / f"stacks/clusters/{name}.yaml").write_text(yaml.safe_dump(cluster))
    (root / f"stacks/Pulumi.{name}.yaml").write_text(
        yaml.safe_dump({"config": {"ray-gcp:cluster": f"stacks/clusters/{name}.yaml"}}))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git checkout of the project with the capped stacks committed, `capchange`'s cap then
    edited in the working tree, and a stand-in `pulumi` that records any call."""
    root = tmp_path_factory.mktemp("project")
    ignore = shutil.ignore_patterns("__pycache__", ".ray-gcp")
    for folder in ("model", "infra", "ops", "bootstrap", "stacks", "engine", "policy"):
        shutil.copytree(PROJECT_ROOT / folder, root / folder, ignore=ignore)
    for name in ("tasks.py", "Pulumi.yaml", "pyproject.toml"):
        shutil.copy(PROJECT_ROOT / name, root / name)
    for name, cluster in STACKS.items():
        write_stack(root, name, cluster)
    (root / "stacks/clusters/overyaml.yaml").write_text(yaml.safe_dump(OVER_YAML))
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    write_stack(root, "capchange", capped(CAP_CHANGE))
    standin = root / "standin-bin"
    standin.mkdir()
    (standin / "pulumi").write_text(f"#!/bin/sh\necho \"$@\" >> {root / 'pulumi-calls'}\n"
                                    "exit 1\n")
    (standin / "pulumi").chmod(0o755)
    return root


@pytest.fixture(scope="module")
def runs(project: Path) -> dict[str, dict[str, Any]]:
    """Every command line in turn, through invoke's own parsing, in one interpreter of the task
    runner (its start and the program's imports once, not once a command): `plan` plans in it
    as the user's `invoke plan` plans in its own, `up` and `diff` start their plan interpreters
    as they do for a user."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PULUMI_STACK", "RAY_GCP_STACK_OUTPUTS")}
    env.update(PYTHONPATH=str(project), RAY_GCP_STATE_DIR=str(project / ".ray-gcp"),
               PATH=os.pathsep.join([os.path.dirname(sys.executable),
                                     str(project / "standin-bin"), "/usr/bin", "/bin"]),
               XDG_CACHE_HOME=str(project / "no-engine"))  # no engine `invoke engine` installed
    ran = subprocess.run([sys.executable, str(RUNNER), json.dumps(list(COMMANDS.values()))],
                         cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    return dict(zip(COMMANDS, json.loads(ran.stdout), strict=True))


def money(amount: float) -> str:
    return f"${amount:.2f}"


def error_lines(run: dict[str, Any]) -> list[str]:
    return [line for line in run["stderr"].splitlines() if line.startswith("error:")]


@pytest.mark.slow  # the module's runs: the tool's plan, up and diff processes, ~19 CPU-s
def test_a_cluster_within_the_cap_says_so_with_its_prices(runs):
    run = runs["within_table"]
    assert run["code"] == 0, run["stderr"]
    assert (f"within the $1.00/h cap: {money(HEAD + SMALL)}/h at the pinned size, up to "
            f"{money(HEAD + 2 * SMALL)}/h at max_workers") in run["stdout"]
    assert f"estimates from the price table as of {TABLE['as_of']}" in run["stdout"]
    assert "spend-cap" not in run["stdout"], "no refusal"


@pytest.mark.slow  # the module's runs: the tool's plan, up and diff processes, ~19 CPU-s
def test_the_total_cap_shows_the_hours_it_lasts_and_then_the_action(runs):
    pinned_hours, max_hours = 300 / (HEAD + SMALL), 300 / (HEAD + 2 * SMALL)
    assert (f"$300.00 in total lasts about {pinned_hours:,.0f} h (about "
            f"{pinned_hours / 24:,.0f} days) at the pinned size and {max_hours:,.0f} h (about "
            f"{max_hours / 24:,.0f} days) at max_workers, then the head stops the whole "
            "cluster (action down)") in runs["within_table"]["stdout"]
    projection = json.loads(runs["within_json"]["stdout"])["spend_cap"]
    # The table's parts are priced to the sixth decimal: a hundredth of a percent apart.
    assert projection["hours_at_pinned"] == pytest.approx(pinned_hours, rel=1e-4)
    assert projection["hours_at_max_workers"] == pytest.approx(max_hours, rel=1e-4)
    assert (projection["max_usd_total"], projection["action"]) == (300, "down")


@pytest.mark.slow  # the module's runs: the tool's plan, up and diff processes, ~19 CPU-s
def test_only_max_workers_over_the_cap_is_a_warning_not_a_refusal(runs):
    run = runs["maxonly_table"]
    # max_workers 2, filled dearest first: the T4 worker, then one ray_worker_small.
    assert run["code"] == 0, run["stderr"]
    assert (f"{money(HEAD + SMALL)}/h at the pinned size is within the $0.50/h cap; "
            f"max_workers could reach {money(HEAD + GPU + SMALL)}/h, over it: the head will "
            "refuse launches past it") in run["stdout"]
    assert error_lines(run) == []


def refusal(pinned: float, cluster_file: str = "stacks/clusters/over.yaml") -> str:
    return (f"{cluster_file}: provider.spend_cap.max_usd_per_hour: the pinned nodes "
            f"alone cost {money(pinned)}/h (estimated from the price table as of "
            f"{TABLE['as_of']}), over the $0.50/h cap: lower min_workers of ray_worker_gpu from "
            f"1 to 0, or raise max_usd_per_hour to at least "
            f"${math.ceil(pinned * 100) / 100:.2f}")


@pytest.mark.slow  # the module's runs: the tool's plan, up and diff processes, ~19 CPU-s
def test_pinned_nodes_over_the_cap_fail_the_plan_with_one_line_and_the_fix(runs):
    run = runs["over_plan"]
    assert run["code"] not in (0, None)
    assert error_lines(run) == [f"error: {refusal(HEAD + SMALL + GPU)}"]
    assert "Traceback" not in run["stderr"]
    assert "the plan is refused" in run["stdout"], "the plan is still shown"


@pytest.mark.slow  # the module's runs: the tool's plan, up and diff processes, ~19 CPU-s
def test_pinned_nodes_over_the_cap_refuse_the_up_before_the_engine(runs, project):
    run = runs["over_up"]
    assert run["code"] not in (0, None)
    assert error_lines(run) == [f"error: {refusal(HEAD + SMALL + GPU)} (before the up: "
                                "nothing was created or changed)"]
    assert not (project / "pulumi-calls").exists(), "the pulumi CLI was run"


@pytest.mark.slow  # the module's runs: the tool's plan, up and diff processes, ~19 CPU-s
def test_a_cluster_yaml_over_the_cap_is_refused_before_its_stack_is_made(runs, project):
    run = runs["over_up_yaml"]
    assert run["code"] not in (0, None)
    assert error_lines(run) == [
        f"error: {refusal(HEAD + SMALL + GPU, 'stacks/clusters/overyaml.yaml')} (before the "
        "up: nothing was created or changed)"]
    assert not (project / "stacks/Pulumi.overyaml.yaml").exists()
    assert not (project / "pulumi-calls").exists(), "the pulumi CLI was run"


@pytest.mark.slow  # the module's runs: the tool's plan, up and diff processes, ~19 CPU-s
def test_pinned_nodes_over_the_cap_fail_the_diff_after_writing_it(runs):
    run = runs["over_diff"]
    assert run["code"] not in (0, None)
    assert error_lines(run) == [f"error: {refusal(HEAD + SMALL + GPU)}"]
    assert "**Spend cap:** max_usd_per_hour $0.50/h, action stop_workers" in run["stdout"]
    assert "`spend-cap` on `stacks/clusters/over.yaml`" in run["stdout"]


@pytest.mark.slow  # the module's runs: the tool's plan, up and diff processes, ~19 CPU-s
def test_the_diff_shows_the_cap_change_and_the_projection_before_and_after(runs):
    run = runs["capchange_diff"]
    assert run["code"] == 0, run["stderr"]
    markdown = run["stdout"]
    assert ("**Spend cap:** max_usd_per_hour $1.00/h, action stop_workers → max_usd_per_hour "
            "$0.13/h, max_usd_total $100.00, action stop_workers") in markdown
    pinned, at_max = HEAD + SMALL, HEAD + 2 * SMALL  # 0.12 and 0.15: the cap now sits between
    assert (f"- {money(pinned)}/h at the pinned size is within the $0.13/h cap; max_workers "
            f"could reach {money(at_max)}/h, over it: the head will refuse launches past it "
            f"(before: within the $1.00/h cap: {money(pinned)}/h at the pinned size, up to "
            f"{money(at_max)}/h at max_workers)") in markdown
    assert (f"- $100.00 in total lasts about {100 / pinned:,.0f} h (about "
            f"{100 / pinned / 24:,.0f} days) at the pinned size") in markdown
    # The head reads the cap from its own metadata: one value changes there, in place.
    assert "**0 to replace, 1 to update, 0 to add, 0 to remove**" in markdown
    assert "`head.metadata.ray-spend-cap: changed" in markdown


def cap_refusal(cluster: dict[str, Any], worker_counts: dict[str, int] | None = None) -> str:
    """The refusal's fix for a cluster, as the plan and the up word it."""
    from model.config import parse_cluster_config
    from model.plan import resolve_worker_counts
    from ops.review.spend_cap import cap_findings, cap_projection

    config = parse_cluster_config(cluster)
    projection = cap_projection(config, resolve_worker_counts(config, worker_counts))
    (finding,) = cap_findings(projection, "c.yaml")
    return finding["message"].split(" cap: ", 1)[1]


def test_the_fix_drops_the_fewest_pinned_workers_dearest_first():
    # Two T4 workers and one small one pinned: 0.0977 + 2 x 0.5427 + 0.0237 = 1.21 $/h. Under
    # a $0.70/h cap, one T4 worker less fits (0.66 $/h); the small one is left alone.
    cluster = capped({"max_usd_per_hour": 0.7}, gpu_workers=2)
    cluster["available_node_types"]["ray_worker_gpu"]["max_workers"] = 2
    cluster["max_workers"] = 4
    assert cap_refusal(cluster) == ("lower min_workers of ray_worker_gpu from 2 to 1, or "
                                    "raise max_usd_per_hour to at least "
                                    f"${math.ceil((HEAD + 2 * GPU + SMALL) * 100) / 100:.2f}")
    # A count the stack file pins above min_workers is lowered there.
    cluster["available_node_types"]["ray_worker_gpu"]["min_workers"] = 0
    assert cap_refusal(cluster, {"ray_worker_gpu": 2}).startswith(
        "lower ray-gcp:workerCounts.ray_worker_gpu in the stack file from 2 to 1, or ")


def test_a_head_dearer_than_the_cap_says_so():
    cluster = capped({"max_usd_per_hour": 0.05})  # the head alone is 0.0977 $/h
    assert cap_refusal(cluster) == (f"the head alone costs {money(HEAD)}/h: choose a smaller "
                                    "head machine or raise max_usd_per_hour to at least "
                                    f"${math.ceil((HEAD + SMALL) * 100) / 100:.2f}")


def test_pinned_spot_workers_that_may_fall_back_to_on_demand_over_the_cap_are_a_warning():
    from model.config import parse_cluster_config
    from model.plan import resolve_worker_counts
    from ops.review.spend_cap import cap_findings, cap_lines, cap_projection

    # The pinned ray_worker_small is spot (0.0237 $/h); on-demand it is priced as the head's
    # machine and disk (0.0977 $/h): 0.1215 $/h pinned, 0.1954 $/h once it falls back.
    cluster = capped({"max_usd_per_hour": 0.15})
    cluster["provider"]["capacity"] = {"ray_worker_small": {"fallback": "on-demand"}}
    config = parse_cluster_config(cluster)
    projection = cap_projection(config, resolve_worker_counts(config, None))
    assert cap_findings(projection, "c.yaml") == [], "spot is what it asks for: no refusal"
    assert cap_lines(projection)["fallback"] == (
        "if spot runs out and the pinned ray_worker_small fall back to on-demand, the pinned "
        f"size reaches {money(2 * HEAD)}/h, over the $0.15/h cap")
