"""The stack outputs the tasks need (head address, user, key, nodes), from pulumi or a file.

Real mode asks the Pulumi Automation API. Test/offline mode reads JSON named by
$RAY_GCP_STACK_OUTPUTS: a file holding one stack's outputs, or a directory of `<stack>.json`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ops.errors import OpsError

OUTPUTS_ENV = "RAY_GCP_STACK_OUTPUTS"
STACK_ENV = "PULUMI_STACK"


@dataclass(frozen=True)
class Node:
    name: str
    node_type: str
    kind: str  # "head" | "worker"
    internal_ip: str
    external_ip: str | None
    status: str
    zone: str = ""
    """The node's zone when the outputs say (a failover zone); else the stack's `zone`."""

    @property
    def api(self) -> str:
        """"tpu" for a TPU VM, else "compute": node names end in their kind (infra/plan.py)."""
        return "tpu" if self.name.endswith("-tpu") else "compute"


@dataclass(frozen=True)
class StackOutputs:
    stack: str
    cluster_name: str
    head_name: str
    head_internal_ip: str
    head_external_ip: str | None
    ssh_user: str
    ssh_port: int
    # repr=False: the key must never reach a log line or a traceback's locals dump.
    ssh_private_key: str = field(repr=False)
    project: str = ""
    zone: str = ""
    service_account_email: str = ""
    docker_container_name: str = ""
    dashboard_url: str = ""
    cluster_config_file: str = ""
    nodes: tuple[Node, ...] = ()
    # `head` and each worker type -> the startup script version its nodes should report.
    script_versions: dict[str, str] = field(default_factory=dict)
    ssh_proxy_command: str = ""
    """The head's ProxyCommand template (ops/ssh_proxy.py); empty: dialled directly."""
    os_login: bool = False
    """Nodes take logins from OS Login: the user is the one ops/os_login.py is given."""
    os_login_account: str = ""

    def wanted_version(self, node: Node) -> str:
        key = "head" if node.kind == "head" or node.name == self.head_name else node.node_type
        return self.script_versions.get(key, "")

    @property
    def head_address(self) -> str:
        """External IP when the head has one, else the internal IP (use_internal_ips / VPN)."""
        return self.head_external_ip or self.head_internal_ip

    @property
    def workers(self) -> list[Node]:
        return [node for node in self.nodes if node.kind != "head"]

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        known = ", ".join(node.name for node in self.nodes) or "none"
        raise OpsError(f"stack {self.stack!r} has no node {name!r}: nodes are {known}")


_REQUIRED = ("cluster_name", "head_name", "head_internal_ip", "ssh_user", "ssh_private_key")


def parse_outputs(stack: str, raw: dict[str, Any]) -> StackOutputs:
    """Plain stack outputs -> StackOutputs; missing keys mean the stack was never deployed."""
    missing = [key for key in _REQUIRED if not raw.get(key)]
    if missing:
        raise OpsError(
            f"stack {stack!r} has no output {missing[0]!r}: deploy it first with "
            f"`invoke up --stack {stack}`"
        )
    nodes = tuple(
        Node(
            name=item["name"],
            node_type=item.get("node_type", ""),
            kind=item.get("kind", "worker"),
            internal_ip=item.get("internal_ip") or "",
            external_ip=item.get("external_ip") or None,
            status=item.get("status", ""),
            zone=item.get("zone") or "",
        )
        for item in raw.get("nodes") or []
    )
    return StackOutputs(
        stack=stack,
        cluster_name=raw["cluster_name"],
        head_name=raw["head_name"],
        head_internal_ip=raw["head_internal_ip"],
        head_external_ip=raw.get("head_external_ip") or None,
        ssh_user=raw["ssh_user"],
        ssh_port=int(raw.get("ssh_port") or 22),
        ssh_private_key=raw["ssh_private_key"],
        project=raw.get("project", ""),
        zone=raw.get("zone", ""),
        service_account_email=raw.get("service_account_email", ""),
        docker_container_name=raw.get("docker_container_name") or "",
        dashboard_url=raw.get("dashboard_url", ""),
        cluster_config_file=raw.get("cluster_config_file", ""),
        nodes=nodes,
        script_versions=dict(raw.get("script_versions") or {}),
        ssh_proxy_command=raw.get("ssh_proxy_command") or "",
        os_login=bool(raw.get("os_login")),
        os_login_account=raw.get("os_login_account") or "",
    )


def resolve_stack_name(stack: str | None, require_file: bool = False) -> str:
    """--stack, else $PULUMI_STACK, else the outputs file's name, else pulumi's selected stack;
    every task picks its stack here. The stack file, when there is one (or `require_file`),
    is checked first, so its mistakes show before any slow work."""
    name = _chosen_stack(stack)
    from infra.stack_config import STACKS_DIR, check_stack

    if require_file or (STACKS_DIR / f"Pulumi.{name}.yaml").exists():
        check_stack(name)
    return name


def _chosen_stack(stack: str | None) -> str:
    if stack:
        return stack
    if os.environ.get(STACK_ENV):
        return os.environ[STACK_ENV]
    source = os.environ.get(OUTPUTS_ENV)
    if source and Path(source).is_file():
        return Path(source).stem
    from ops import pulumi_cli

    return pulumi_cli.selected_stack_name()


def _read_outputs_file(stack: str, source: Path) -> dict[str, Any]:
    path = source / f"{stack}.json" if source.is_dir() else source
    if not path.exists():
        if source.is_dir():
            known = ", ".join(sorted(p.stem for p in source.glob("*.json"))) or "none"
            raise OpsError(f"no such stack {stack!r} in {source}: stacks are {known}")
        raise OpsError(f"{OUTPUTS_ENV}={source} does not exist: point it at an outputs JSON")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise OpsError(f"{path} is not valid JSON (line {exc.lineno}): {exc.msg}") from None


def load_outputs(stack: str | None = None) -> StackOutputs:
    """The outputs of `stack` (or the default stack) as StackOutputs."""
    name = resolve_stack_name(stack)
    source = os.environ.get(OUTPUTS_ENV)
    if source:
        return parse_outputs(name, _read_outputs_file(name, Path(source)))
    from ops import pulumi_cli

    return parse_outputs(name, pulumi_cli.stack_outputs(name))
