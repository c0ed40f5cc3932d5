"""`invoke up -c` checks the cluster YAML whole, by the code `invoke plan -c` runs, before it
writes a stack file or the engine creates anything: whenever `plan -c` refuses a YAML, `up -c`
refuses it with the same one message, creates nothing in the (fake) cloud and writes nothing.

Differential, over a corpus: every refusal the config tests know (harvested from
tests/model/test_config_*.py into tests/support/corpus/refused_configs.yaml by
tests/support/refusal_corpus.py), the
missing `auth.ssh_private_key` a user met (`up` once made 10 resources, then printed the error
three times), and YAMLs broken at random by tests/support/yaml_mutations.py. The
corpus goes through the gate the up path calls (`check_before_create`); a handful goes
through the real `invoke up` with the pinned engine against the fake cloud.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ops.errors import OpsError, is_user_error
from ops.review.guardrails import refuse_over_cap
from ops.review.plan import check_before_create, plan_yaml
from tests.fakes.compute import FakeComputeServer, Faults
from tests.support.engine_stack import PROJECT_ROOT, EngineWorkspace
from tests.support.refusal_corpus import CORPUS
from tests.support.warm_python import run_module
from tests.support.yaml_mutations import mutated_texts

# Writes or compares the checkout's stacks/ folder (EngineWorkspace.repo_stack, the stack files a
# refused up must not leave): one worker runs every such test (tests/conftest.py's groups).
pytestmark = pytest.mark.xdist_group("checkout-stacks")

STACKS = PROJECT_ROOT / "stacks"
MINIMAL = (STACKS / "clusters" / "minimal.yaml").read_text()
USERS_OWN = ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE",
             "RAY_GCP_SECRETS_PROVIDER")
_CLUSTER_NAME = re.compile(r"^cluster_name: *(\S+) *$", re.MULTILINE)


def own_cluster_name(text: str, index: int) -> str:
    """The YAML with a cluster_name no shipped stack has (a shipped one would be refused as
    another YAML's stack before its own problem shows); any other name is kept as it is."""
    def renamed(match: re.Match[str]) -> str:
        name = match.group(1)
        taken = (STACKS / f"Pulumi.{name}.yaml").exists()
        return f"cluster_name: refused-{index}" if taken else match.group(0)
    return _CLUSTER_NAME.sub(renamed, text)


def missing_key_yaml(folder: Path) -> str:
    """The user's cluster: minimal, with `auth.ssh_private_key` naming a file that is not
    there (~/.ssh/id_rsa on a machine without one)."""
    return MINIMAL.replace("cluster_name: minimal", "cluster_name: e2-missing-key") \
        + f"  ssh_private_key: {folder / 'no-such-dir' / 'id_rsa'}\n"


def corpus_texts() -> list[tuple[str, str]]:
    """The corpus: by default the first YAML of each config test (one per refusal rule; its
    other parameters are the same rule's other values), all of them with
    REFUSAL_CORPUS=all."""
    entries = yaml.safe_load(CORPUS.read_text())
    if os.environ.get("REFUSAL_CORPUS") != "all":
        firsts: dict[str, dict[str, str]] = {}
        for entry in entries:
            firsts.setdefault(entry["from"].split("[")[0], entry)
        entries = list(firsts.values())
    return [(entry["from"], entry["yaml"]) for entry in entries]


def plan_says(path: Path) -> str | None:
    """What `invoke plan -c` refuses the YAML with (its `plan_yaml`, then its spend-cap
    refusal), or None when it plans."""
    try:
        plan = plan_yaml(str(path))
        refuse_over_cap(plan["stack"], plan["policy"])
    except Exception as error:  # noqa: BLE001 - a bug (not a user error) is raised again
        if not is_user_error(error):
            raise
        return str(error)
    return None


def gate_says(path: Path) -> str | None:
    """What the gate `invoke up -c` runs before it writes or creates refuses it with."""
    try:
        check_before_create(None, str(path))
    except OpsError as error:
        return str(error)
    return None


def same_refusal(planned: str | None, gated: str | None) -> bool:
    """The same message (the spend cap's refusal adds what the up did not do)."""
    if planned is None or gated is None:
        return planned == gated
    return gated in (planned, f"{planned} (before the up: nothing was created or changed)")


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A state folder and cache of this test's own; the state folder must stay unmade."""
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "state"


def stack_files() -> set[str]:
    return {path.name for path in STACKS.glob("Pulumi.*.yaml")}


def test_the_gate_refuses_every_corpus_yaml_plan_refuses_with_plan_s_message(tmp_path, isolated):
    cases = [("the missing ssh_private_key", missing_key_yaml(tmp_path)), *corpus_texts()]
    paths = []
    for index, (_, text) in enumerate(cases):
        path = tmp_path / "cases" / str(index) / "cluster.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(own_cluster_name(text, index))
        paths.append(path)
    before = stack_files()

    planned = [plan_says(path) for path in paths]
    gated = [gate_says(path) for path in paths]  # one at a time, as each up makes them

    differ = [(source, plan, gate) for (source, _), plan, gate in zip(cases, planned, gated,
                                                                        strict=True)
              if not same_refusal(plan, gate)]
    assert differ == []
    assert planned[0] is not None and "auth.ssh_private_key" in planned[0]
    assert sum(plan is not None for plan in planned) >= 0.9 * len(cases)  # a corpus of refusals
    assert stack_files() == before
    assert not isolated.exists()


@pytest.fixture(scope="module")
def odd_paths(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    base = tmp_path_factory.mktemp("odd")
    (base / "empty").write_text("")
    (base / "dir").mkdir()
    (base / "not-a-key").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot base64\n")
    return [str(base / name) for name in ("empty", "dir", "not-a-key", "missing")]


@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_gate_and_plan_agree_on_randomly_broken_yamls(data, odd_paths, tmp_path, isolated):
    _, text = data.draw(mutated_texts(odd_paths))
    path = tmp_path / "generated.yaml"
    path.write_bytes(own_cluster_name(text, 0).encode("utf-8", "surrogatepass"))
    before = stack_files()
    planned = plan_says(path)
    gated = gate_says(path)
    assert same_refusal(planned, gated), (planned, gated)
    assert stack_files() == before
    assert not isolated.exists()


# --- the real `invoke up -c`, with the engine and the fake cloud --------------------------

ENGINE_CASES = {
    "missing ssh_private_key": lambda folder: missing_key_yaml(folder),
    "zone outside its region": lambda folder: MINIMAL.replace(
        "cluster_name: minimal", "cluster_name: e2-zone").replace(
        "availability_zone: us-west1-a", "availability_zone: us-east1-b"),
    "unknown head type": lambda folder: MINIMAL.replace(
        "cluster_name: minimal", "cluster_name: e2-head") + "head_node_type: no_such_type\n",
    "min_workers above max": lambda folder: MINIMAL.replace(
        "cluster_name: minimal", "cluster_name: e2-counts") + "max_workers: 1\n"
        "available_node_types:\n  ray_head_default:\n    resources: {}\n"
        "    node_config: {machineType: n1-standard-2}\n"
        "  w:\n    min_workers: 3\n    max_workers: 2\n    resources: {}\n"
        "    node_config: {machineType: n1-standard-2}\n",
}


@pytest.fixture
def engine_user(engine_bin: Path,
                tmp_path: Path) -> Iterator[tuple[dict[str, str], FakeComputeServer]]:
    """A user who set up nothing for pulumi, the engine pointed at the fake cloud."""
    bin_dir = engine_bin
    shipped = stack_files()
    with FakeComputeServer(Faults(operation_s=0.0)) as fake:
        space = EngineWorkspace(fake, bin_dir, root=tmp_path / "engine")
        env = {key: value for key, value in {**os.environ, **space.env}.items()
               if key not in USERS_OWN}
        env["RAY_GCP_STATE_DIR"] = str(tmp_path / "state-dir")
        env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
        try:
            yield env, fake
        finally:  # a failing run must not leave a stack file in the checkout
            for name in stack_files() - shipped:
                (STACKS / name).unlink()


def invoke(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_module(["invoke", *args], cwd=PROJECT_ROOT, env=env, timeout=600)


@pytest.mark.parametrize("case", sorted(ENGINE_CASES))
def test_invoke_up_refuses_what_plan_refuses_before_anything_is_made(case, engine_user,
                                                                       tmp_path):
    env, fake = engine_user
    cluster_yaml = tmp_path / "my-cluster.yaml"
    cluster_yaml.write_text(ENGINE_CASES[case](tmp_path))
    before = stack_files()

    planned = invoke(env, "plan", "-c", str(cluster_yaml))
    upped = invoke(env, "up", "-c", str(cluster_yaml), "-y")

    assert planned.returncode == 1 and planned.stderr.startswith("error: "), planned.stderr
    message = planned.stderr.strip()
    assert upped.returncode == 1
    assert upped.stderr.strip() == message  # the same message, once, and nothing else
    assert "error" not in upped.stdout
    assert [served.method for served in fake.served] == []  # the cloud heard nothing
    assert stack_files() == before
    assert not (tmp_path / "state-dir").exists()
