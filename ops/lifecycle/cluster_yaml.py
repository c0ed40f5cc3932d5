"""`invoke up/preview/refresh/down -c cluster.yaml`: a Ray cluster YAML as the whole input, as
`ray up cluster.yaml` takes it.

The stack is named after the YAML's cluster_name (ops.stacks.stack.stack_for_cluster_yaml). The
first `up` or `preview` writes `.ray-gcp/stacks/Pulumi.<cluster_name>.yaml` (in the folder the task
runs in, or under $RAY_GCP_STATE_DIR) naming the YAML and creates the stack: in pulumi's file
backend under the state folder (`.ray-gcp/.pulumi/`, or under $RAY_GCP_STATE_DIR) unless
PULUMI_BACKEND_URL names the user's own, its secrets encrypted with a passphrase generated once
into `.ray-gcp/.pulumi-passphrase` (0600) unless the user sets PULUMI_CONFIG_PASSPHRASE(_FILE),
or with the key service RAY_GCP_SECRETS_PROVIDER names (ops.stacks.stack).
Later runs with the same YAML reuse both. Every check (the YAML whole, the stack name, another
YAML owning that stack, the pulumi CLI) comes before anything is written.
"""

from __future__ import annotations

import sys
from typing import TextIO

from model.stack_config import shown
from ops.errors import OpsError
from ops.paths import local_backend_url, mark_local_backend, passphrase_file
from ops.stacks.stack import (
    ClusterYamlStack,
    Stack,
    new_stack_secrets_provider,
    require_cli,
    stack_for_cluster_yaml,
    user_backend,
    user_passphrase,
    uses_passphrase,
)


def stack_from_yaml(stack: str | None, cluster_yaml: str, create: bool,
                    out: TextIO = sys.stdout) -> Stack:
    """The stack `cluster_yaml` deploys as, ready for an operation: with `create` (up,
    preview) its stack file written and the stack created when missing; without (refresh,
    down) they must exist."""
    if stack:
        raise OpsError(f"--stack {stack} and --config {cluster_yaml} both choose the stack: give "
                       "one (with --config the stack is the YAML's cluster_name)")
    found = stack_for_cluster_yaml(cluster_yaml)
    if not found.exists and not create:
        raise OpsError(f"{cluster_yaml}: no stack deploys it yet ({shown(found.stack_file)}, "
                       f"stack {found.name!r}, is missing): `invoke up -c {cluster_yaml}` "
                       "creates it")
    if create:
        new_stack_secrets_provider(found.stack_file)  # checked before the CLI is looked for
    require_cli()
    if create:
        place_stack(found, out)
    chosen = Stack.choose(found.name, require_file=True)
    if create:
        chosen.automation(create=True)
    return chosen


def place_stack(found: ClusterYamlStack, out: TextIO = sys.stdout) -> None:
    """Everything the stack needs on this machine before pulumi creates it: a new stack's
    backend record (the local file backend, unless the user names one) and stack file, and
    the generated passphrase (when its secrets go under one and the user gives none). The
    secrets provider is checked before anything is written. A stack file already there is
    kept as it is (its encryption salt, its worker counts)."""
    if uses_passphrase(found.stack_file) and not user_passphrase():
        passphrase_file(create=True)
    if found.exists:
        return
    where = "the backend PULUMI_BACKEND_URL names"
    if not user_backend():
        mark_local_backend(found.name)
        where = local_backend_url().removeprefix("file://") + "/.pulumi"
    if found.write_stack_file():
        print(f"stack {found.name!r} (the YAML's cluster_name): wrote {shown(found.stack_file)} "
              f"naming {found.setting}; its state goes to {where}", file=out, flush=True)
