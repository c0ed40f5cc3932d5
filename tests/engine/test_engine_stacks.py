"""Every stack in stacks/ through the real pulumi engine against the fake cloud, in one pass
each, as a Pulumi user and an `invoke` user run it on this project: the pulumi CLI on a copy of
the repository (Pulumi.yaml as it is, the stack's settings file from stacks/; the language host
double, tests/fakes/language_host, runs `main: infra/`) previews exactly the offline plan and
creates it (what the fake then holds, secrets in the exported state); `invoke up` on the same
state changes nothing and records the same state (same URNs, same inputs: either takes over
the other's stack), and its refresh reads back what was made; `pulumi destroy` leaves nothing
of the cluster. Four engine runs a stack (preview, up, invoke's refresh and up, destroy), each
stack in a workspace of its own so the stacks spread over the workers.

The gcp resources go through the stand-in gcp plugin; the worker groups, the sweeper and the
queued slices are the program's dynamic providers, unpickled and run by the engine's
`pulumi-python` plugin process: the fake records which process created each node.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import re
import tarfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ops.remote.os_login import ENDPOINT_ENV as OS_LOGIN_ENDPOINT_ENV
from ops.review.plan import plan_stack
from tests.fakes.compute import FakeComputeServer, Faults
from tests.fakes.compute.identity import USER, USER_SCOPES
from tests.fakes.oslogin import FakeOsLogin
from tests.support.engine_cli import CliProject
from tests.support.engine_stack import (
    OPERATION_TIMEOUT_S,
    EngineWorkspace,
    cluster_nodes,
    repo_stacks,
)
from tests.support.warm_python import run_module

INSTANCE = "gcp:compute/instance:Instance"
TPU_VM = "gcp:tpu/v2Vm:V2Vm"
AUTOSCALER_ACCOUNT = "ray-autoscaler-sa-v1"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_READER = "gcp:storage/bucketIAMMember:BucketIAMMember"
BUCKET_OBJECT = "gcp:storage/bucketObject:BucketObject"
ROUTER_NAT = "gcp:compute/routerNat:RouterNat"
DYNAMIC_PROVIDER = "pulumi:providers:pulumi-python"
ACCOUNT = USER.rsplit("/", 1)[-1]  # the session's user (tests/conftest.py), by its email
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # pulumi's marker of a secret value
# A step of `pulumi preview --diff`: `+ TYPE: (create)` and, on the next line, its URN.
DIFF_STEP = re.compile(
    r"^\s*\S+ (?P<type>[\w:/.-]+): \((?P<op>[\w-]+)\)\n\s*\[urn=(?P<urn>[^\]]+)\]", re.M)


@pytest.fixture
def fake() -> Iterator[FakeComputeServer]:
    with FakeComputeServer(Faults(operation_s=0.0)) as server:
        yield server


@pytest.fixture
def workspace(engine_bin: Path, fake: FakeComputeServer, tmp_path: Path
              ) -> Iterator[EngineWorkspace]:
    """The engine on the fake cloud, and the fake OS Login the tasks of an `os_login` stack
    (`private`) put the user's key in."""
    with FakeOsLogin({ACCOUNT: "you_example_com"}) as os_login:
        yield EngineWorkspace(fake, engine_bin, root=tmp_path,
                              extra_env={OS_LOGIN_ENDPOINT_ENV: os_login.endpoint})


def planned(stack: str) -> dict[str, Any]:
    return plan_stack(stack)


def of_kind(plan: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["kind"] == kind]


def where(plan: dict[str, Any]) -> tuple[str, str, str]:
    """(project, zone, cluster name), as the plan's cluster sweeper holds them."""
    (sweeper,) = of_kind(plan, "ClusterSweeper")
    inputs = sweeper["inputs"]
    return inputs["project"], inputs["zone"], inputs["cluster_name"]


def assert_bucket_holds_its_plan(fake: FakeComputeServer, plan: dict[str, Any]) -> None:
    """Each planned bucket exists, private to its planned readers, with its planned objects.
    The autoscaler config is named after its content's sha256, and its content holds the
    generated SSH key the plan shows as a placeholder: its name is checked against its bytes."""
    for bucket in (r for r in plan["resources"] if r["type"] == BUCKET):
        name = bucket["inputs"]["name"]
        live = fake.storage.buckets[name]
        assert live["iamConfiguration"]["publicAccessPrevention"] == "enforced"
        assert live["iamConfiguration"]["uniformBucketLevelAccess"] == {"enabled": True}
        granted = {(b["role"], m) for b in fake.storage.policies[name]["bindings"]
                   for m in b["members"]}
        assert granted == {(r["inputs"]["role"], r["inputs"]["member"])
                           for r in plan["resources"] if r["type"] == BUCKET_READER
                           and r["inputs"]["bucket"] == name}
        planned = sorted(r["inputs"]["name"] for r in plan["resources"]
                         if r["type"] == BUCKET_OBJECT and r["inputs"]["bucket"] == name)
        stored = sorted(o for b, o in fake.storage.objects if b == name)
        assert [o.startswith("autoscaler/") or o for o in stored] == \
            [o.startswith("autoscaler/") or o for o in planned]
        for key in stored:
            if key.startswith("autoscaler/"):
                data = fake.storage.objects[(name, key)]
                assert key == f"autoscaler/{hashlib.sha256(data).hexdigest()}.yaml"


def masked(value: Any) -> Any:
    """An input with each secret's ciphertext (fresh per encryption) left out."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG) == "1b47061264138c4ac30d75fd1eb44270":
            return "[secret]"
        return {k: masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v) for v in value]
    return value


def recorded(deployment: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """URN -> (parent, inputs) of every resource the stack holds, providers' too. The dynamic
    providers' default provider records the stack's config, where `ray-gcp:cluster` names the
    same YAML two ways: invoke runs the engine on its copy of the stack file, which makes the
    path absolute (ops.stacks.stack), the CLI on the tracked file, relative to the project."""
    return {r["urn"]: (r.get("parent"), masked(
        {key: value for key, value in (r.get("inputs") or {}).items()
         if not (r["type"] == DYNAMIC_PROVIDER and key == "ray-gcp:cluster")}))
            for r in deployment["resources"]}


def invoke_up(cli: CliProject, stack: str) -> list[str]:
    """`invoke up -s STACK` in the CLI's copy of the project (the same stack files, salts
    included, and the same backend), as a user runs it in a checkout: the summaries it prints
    (one: its up refreshes in the same engine run)."""
    done = run_module(["invoke", "up", "-s", stack], cwd=cli.folder, env=cli.env,
                      timeout=OPERATION_TIMEOUT_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return re.findall(r"^summary: (.*) in [\d.]+s$", done.stdout, re.M)


@pytest.mark.slow
@pytest.mark.parametrize("stack", repo_stacks())
def test_every_stack_previews_its_plan_ups_through_the_cli_and_invoke_and_destroys_to_nothing(
    stack: str, workspace: EngineWorkspace, fake: FakeComputeServer
) -> None:
    plan = planned(stack)
    project, zone, cluster = where(plan)
    # The fake's regions have only `<region>-a` unless told: it offers the zone the stack names.
    zones = fake.cloud.catalogue.zones
    region = zone.rsplit("-", 1)[0]
    zones[region] = sorted({*zones.get(region, [f"{region}-a"]), zone})
    cli = CliProject(workspace)
    cli.run("stack", "init", stack, *workspace.init_options())

    # `pulumi preview --diff`, as a user reads it: every step a create, the offline plan's
    # every custom resource among them, the component at the top; nothing made.
    shown = cli.run("preview", "--diff", "--stack", stack).stdout
    steps = [(m["op"], m["type"], m["urn"].rsplit("::", 1)[1]) for m in DIFF_STEP.finditer(shown)]
    assert steps and {op for op, _, _ in steps} == {"create"}, shown[-3000:]
    custom = {(r["type"], r["name"]) for r in plan["resources"] if r["custom"]}
    previewed = {(kind, name) for _, kind, name in steps}
    assert custom <= previewed, custom - previewed
    assert "ray-gcp:index:RayCluster" in {kind for kind, _ in previewed}, shown[-3000:]
    assert cluster_nodes(fake, project, zone, cluster) == {}

    # The update the preview above showed, as a user or CI runs it once they have read that
    # preview: `--skip-preview` (plain `up --yes` would run the program a second time for a
    # preview of its own, which nothing here reads).
    creators_before = len(fake.creators)
    cli.run("up", "--yes", "--skip-preview", "--stack", stack)
    nodes = cluster_nodes(fake, project, zone, cluster)
    assert [n["labels"].get("ray-node-type") for n in nodes.values()].count("head") == 1, nodes
    named = {r["inputs"]["name"] for r in plan["resources"] if r["type"] in (INSTANCE, TPU_VM)}
    named |= {r["inputs"]["name"] for r in of_kind(plan, "QueuedTpuSlice")}
    assert named <= set(nodes), named - set(nodes)
    counts = Counter(node["labels"]["ray-user-node-type"] for name, node in nodes.items()
                     if name not in named)
    wanted = {r["inputs"]["node_type"]: r["inputs"]["count"]
              for r in of_kind(plan, "WorkerGroup") if r["inputs"]["count"]}
    assert counts == Counter(wanted)

    # Worker groups' nodes come from the dynamic provider in the engine's plugin process,
    # the head from the stand-in gcp plugin: neither from this test's process.
    creators = fake.creators[creators_before:]
    worker_calls = [c for c in creators if c[0] in ("insert", "bulkInsert")
                    and "pulumi.dynamic" in c[2]]
    assert bool(worker_calls) == bool(wanted), creators
    assert all("pulumi.dynamic" in c[2] or "tests.fakes.standin_gcp" in c[2]
               for c in creators), creators

    deployment = cli.export(stack)
    state = json.dumps(deployment)
    assert "-----BEGIN" not in state and "PRIVATE KEY" not in state
    assert '"ciphertext"' in state
    assert_bucket_holds_its_plan(fake, plan)
    for nat in (r for r in plan["resources"] if r["type"] == ROUTER_NAT):
        inputs = nat["inputs"]
        router = fake.platform.routers[(project, inputs["region"])][inputs["router"]]
        assert [n["name"] for n in router.get("nats", [])] == [inputs["name"]]

    # `invoke up` takes over the stack the CLI made: its one engine run reads back exactly
    # what the up made and changes nothing, and the inputs its inline run of the program
    # records are the ones the CLI's run gave, under the same URNs.
    summaries = invoke_up(cli, stack)
    assert len(summaries) == 1 and re.fullmatch(r"\d+ same", summaries[0]), summaries
    by_cli, by_invoke = recorded(deployment), recorded(cli.export(stack))
    assert sorted(by_invoke) == sorted(by_cli)
    differ = {urn: sorted(key for key in {**by_cli[urn][1], **by_invoke[urn][1]}
                          if by_cli[urn][1].get(key) != by_invoke[urn][1].get(key))
              for urn in by_invoke if by_invoke[urn] != by_cli[urn]}
    # The same state either way: so the CLI on the stack invoke last deployed has nothing to
    # change either (its own program run, in its up, recorded exactly these inputs).
    assert differ == {}

    # (A destroy's own preview plans the same deletes from the state, no program run: skipped.)
    cli.run("destroy", "--yes", "--skip-preview", "--stack", stack)
    buckets = {r["inputs"]["name"] for r in plan["resources"] if r["type"] == BUCKET}
    assert not buckets & set(fake.storage.buckets)
    assert not {bucket for bucket, _ in fake.storage.objects} & buckets
    assert cluster_nodes(fake, project, zone, cluster) == {}
    assert fake.platform.is_empty(project)["firewalls"] == []
    assert fake.platform.is_empty(project)["routers"] == []
    assert cli.export(stack).get("resources") in (None, [])
    # The project's autoscaler account and its role bindings are shared and retained.
    accounts = fake.platform.accounts[project]
    assert f"{AUTOSCALER_ACCOUNT}@{project}.iam.gserviceaccount.com" in accounts


def test_file_mount_contents_credentials_and_ray_token_are_ciphertext_in_the_state(
    workspace: EngineWorkspace, fake: FakeComputeServer, tmp_path
) -> None:
    import yaml

    from tests.support.engine_stack import PROJECT_ROOT

    secret_text = "file-mount-secret-7f3a9c1e-do-not-leak"
    mount = tmp_path / "settings.txt"
    mount.write_text(secret_text)
    token = "ya29.engine-test-token-0b5e2d4c"
    # the YAML's credential (the user's), which the explicit provider sends
    fake.identities.mint(USER, USER_SCOPES, token=token)
    cluster = yaml.safe_load((PROJECT_ROOT / "stacks/clusters/minimal.yaml").read_text())
    cluster["cluster_name"] = "secrets"
    cluster["file_mounts"] = {"/home/ray/settings.txt": str(mount)}
    cluster["provider"]["gcp_credentials"] = {"type": "credentials_token", "credentials": token}
    path = tmp_path / "secrets.yaml"
    path.write_text(yaml.safe_dump(cluster))
    workspace.write_stack("secrets", {"ray-gcp:cluster": str(path)})
    workspace.run("secrets", "up")
    try:
        state = json.dumps(workspace.export("secrets"))
        encoded = base64.b64encode(secret_text.encode()).decode()
        # Ray's auth token went to Secret Manager (the nodes read it there), never to state.
        (version,) = [v for (_, secret), versions in fake.platform.versions.items()
                      if secret == "ray-secrets-auth-token" for v in versions]
        ray_token = base64.b64decode(version["data"]).decode()
        assert len(ray_token) == 64
        for plain in (secret_text, encoded, token, "PRIVATE KEY", ray_token, version["data"]):
            assert plain not in state, plain
        # Made once: another `up` keeps the token (no new secret version).
        again = workspace.run("secrets", "up")
        assert [v for (_, secret), versions in fake.platform.versions.items()
                if secret == "ray-secrets-auth-token" for v in versions] == [version]
        # The archive went to the cluster's bucket byte for byte: the mount is inside it.
        (archive,) = [data for (_, key), data in fake.storage.objects.items()
                      if key.endswith(".tar.gz")]
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            contents = [tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()]
        assert secret_text.encode() in contents
        # Named by an HMAC under the stack's random secret, which the state keeps encrypted:
        # no bare hash of the packed files is in the state or the bucket.
        tar_bytes = gzip.decompress(archive)
        plain = hashlib.sha256(tar_bytes).hexdigest()
        assert plain not in state and not any(plain in key for _, key in fake.storage.objects)
        (key_secret,) = [r for r in workspace.export("secrets")["resources"]
                         if r["type"].endswith(":StackSecret")
                         and r["urn"].endswith("-file-mounts-key")]
        assert "ciphertext" in json.dumps(key_secret["outputs"]["value"])
        # The next run (that second `up`) knew the secret: the same files, the same name,
        # nothing to do.
        assert again.operations() == {}, again.operations()
    finally:
        workspace.run("secrets", "destroy")
