"""Every kind of node a shipped stack makes boots on Google as Google enforces identity.

For each node of the `full`, `gpu-docker`, `tpu` and `private` stacks (the head, each pinned
worker group's body, each type the head's autoscaler may launch from its bootstrap config, each
TPU host Pulumi keeps), the real program (under Pulumi's mocks) gives the node's metadata, its
service account and scopes, and the IAM bindings it creates (project members, SecretIamMember,
BucketIAMMember). The node's real rendered startup script then runs against FakeGoogle holding
exactly those: the metadata server gives a token only to a node with an account, and Secret
Manager and Cloud Storage check the token's scopes and those bindings. Ray must start with token
auth on every node.

Not root on the test machine: a stub `id -u` says 1000, so the script takes the path of an
unprivileged run (no user is created here) and everything else runs for real.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootstrap.head_provider.pinned import PROVIDER_FIELD as PINNED_TYPES_FIELD
from tests.support.bootstrap_stubs import STUB_RAY_TOKEN, FakeGoogle, gce_env, stop_watchers
from tests.support.program_runs import head_config_text, run_stack

STACKS = ["full", "gpu-docker", "tpu", "private"]
INSTANCE = "gcp:compute/instance:Instance"
WORKER_GROUP = "pulumi-python:dynamic/ray-gcp:WorkerGroup"
TPU_VM = "gcp:tpu/v2Vm:V2Vm"
KEY_TEXT = "-----BEGIN OPENSSH PRIVATE KEY-----\nstub\n-----END OPENSSH PRIVATE KEY-----\n"
# Not root: the script creates no user on the test machine (`id NAME` and the rest stay real).
# gpu-docker's initialization waits for the NVIDIA driver to answer.
MACHINE_STUBS = {
    "id": '#!/bin/sh\n[ "$1" = -u ] && [ $# = 1 ] && { echo 1000; exit 0; }\n'
          'exec /usr/bin/id "$@"\n',
    "nvidia-smi": "#!/bin/sh\n",
}


@dataclass
class Node:
    kind: str
    metadata: dict[str, str]
    email: str | None
    scopes: tuple[str, ...]


def _items(metadata: Any) -> dict[str, str]:
    if isinstance(metadata, dict) and "items" in metadata:
        return {item["key"]: item["value"] for item in metadata["items"]}
    return dict(metadata or {})


def _account(body: dict[str, Any]) -> tuple[str | None, tuple[str, ...]]:
    """A body's service account: Compute's `serviceAccounts[0]`, TPU's `serviceAccount`, or
    pulumi-gcp's `serviceAccount` input (scopes or, in a TPU API body, scope)."""
    account = (body.get("serviceAccounts") or [None])[0] or body.get("serviceAccount")
    if not account:
        return None, ()
    return account["email"], tuple(account.get("scopes") or account.get("scope") or ())


Bindings = list[tuple[str, str, str]]
Objects = dict[tuple[str, str], bytes]


def stack_nodes(stack: str) -> tuple[list[Node], Bindings, Objects]:
    """The stack's nodes, its IAM bindings (resource, role, member) and its bucket objects."""
    run = run_stack(stack)
    (head,) = run.of_type(INSTANCE)
    project = head.inputs["project"]
    nodes = [Node("head", _items(head.inputs["metadata"]), *_account(head.inputs))]
    for group in run.of_type(WORKER_GROUP):
        body = group.inputs["body"]
        nodes.append(Node(f"pinned {group.name}", _items(body["metadata"]), *_account(body)))
    for vm in run.of_type(TPU_VM):
        nodes.append(Node(f"TPU host {vm.name}", _items(vm.inputs["metadata"]),
                          *_account(vm.inputs)))
    config = yaml.safe_load(head_config_text(run, head))
    pinned_twins = set(config["provider"].get(PINNED_TYPES_FIELD, {}))
    for name, node_type in config["available_node_types"].items():
        if name in pinned_twins:  # Pulumi's pinned workers as v2 counts them: never launched
            continue
        body = node_type["node_config"]
        nodes.append(Node(f"autoscaled {name}", _items(body["metadata"]), *_account(body)))
    bindings = [(f"projects/{project}", m.inputs["role"], m.inputs["member"])
                for m in run.of_type("gcp:projects/iAMMember:IAMMember")]
    bindings += [(f"projects/{project}/secrets/{m.inputs['secretId']}", m.inputs["role"],
                  m.inputs["member"])
                 for m in run.of_type("gcp:secretmanager/secretIamMember:SecretIamMember")]
    bindings += [(f"projects/_/buckets/{m.inputs['bucket']}", m.inputs["role"],
                  m.inputs["member"])
                 for m in run.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")]
    objects = {}
    for stored in run.of_type("gcp:storage/bucketObject:BucketObject"):
        source = stored.inputs["source"]
        content = source.encode() if isinstance(source, str) else \
            Path(source["path"]).read_bytes()
        objects[(stored.inputs["bucket"], stored.inputs["name"])] = content
    return nodes, bindings, objects


def _secrets(metadata: dict[str, str]) -> dict[str, bytes]:
    """What the secret versions the node's metadata names hold (the program's are secret)."""
    held = {}
    if "ray-auth-token-secret" in metadata:
        held[metadata["ray-auth-token-secret"]] = STUB_RAY_TOKEN.encode()
    if "ray-bootstrap-ssh-key-secret" in metadata:
        held[metadata["ray-bootstrap-ssh-key-secret"]] = KEY_TEXT.encode()
    return held


def boot(tmp_path: Path, node: Node, bindings: Bindings,
         objects: Objects) -> tuple[int, str, list[list[str]]]:
    """Run the node's startup script as on GCE against FakeGoogle; (exit, log, ray auth)."""
    head_name = node.metadata.get("ray-head-address", "the-head")
    with FakeGoogle(service_account=node.email, scopes=node.scopes, bindings=list(bindings),
                    secrets=_secrets(node.metadata), objects=dict(objects),
                    attributes=dict(node.metadata)) as google:
        env = gce_env(tmp_path, google, head_name)
        for name, text in MACHINE_STUBS.items():
            (tmp_path / "stubs" / name).write_text(text)
            (tmp_path / "stubs" / name).chmod(0o755)
        env.update(RAY_BOOTSTRAP_SECRET_TRIES="2", RAY_BOOTSTRAP_SECRET_DELAY="0",
                   RAY_BOOTSTRAP_FETCH_TRIES="2", RAY_BOOTSTRAP_FETCH_DELAY="0",
                   RAY_BOOTSTRAP_SKIP_RAY_STOP="1", RAY_HEAD_IP="10.128.0.7")
        script = tmp_path / "startup-script"
        script.write_text(node.metadata["startup-script"])
        try:
            done = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True,
                                  timeout=60)
        finally:
            stop_watchers(tmp_path)
    log_file, auth_file = tmp_path / "bootstrap.log", tmp_path / "calls.auth"
    log = log_file.read_text() if log_file.exists() else done.stderr
    auth = [line.split(" ", 2) for line in auth_file.read_text().splitlines()] \
        if auth_file.exists() else []
    return done.returncode, log, auth


def _cases() -> list[Any]:
    return [pytest.param(stack, id=stack) for stack in STACKS]


@pytest.mark.parametrize("stack", _cases())
@pytest.mark.slow  # every node's script, run: 4-8 CPU-s a stack
def test_every_node_of_the_stack_starts_ray_with_token_auth_as_the_program_makes_it(
        tmp_path, stack):
    nodes, bindings, objects = stack_nodes(stack)
    kinds = {node.kind.split()[0] for node in nodes}
    assert {"head", "autoscaled"} <= kinds
    assert kinds & {"pinned", "TPU"} or stack == "private", kinds
    failures = []
    for index, node in enumerate(nodes):
        folder = tmp_path / f"node-{index}"
        folder.mkdir()
        code, log, auth = boot(folder, node, bindings, objects)
        starts = [call for call in auth if call[0] == "start"]
        if code != 0 or not starts or any(call[1] != "token" for call in starts):
            failures.append(f"{node.kind} (as {node.email}, scopes {node.scopes}): exit {code}"
                            f"\n{log[-1500:]}")
    assert not failures, "\n\n".join(failures)
