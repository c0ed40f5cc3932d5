"""What a run killed half way left in the stack's state, settled before the next run acts.

The engine journals a create before it asks the provider, and a kill before the answer leaves
a pending CREATE in the state: the engine keeps it for good, warns on every run, and creates
the resource again, which fails for a named one (the head: `409 ... already exists`) or leaves
the first one behind (pkg/backend/snapshot.go keeps pending creates "because these must
require user intervention"; `pulumi refresh` clears them only interactively). A pending
update or delete needs no more than the refresh every `up` makes.

`settle` reads the state (`pulumi stack export`) and says what it found; each pending create is
then adopted: entered into the state under the ID its provider gives that resource (the head
and TPU slices by their names, a worker group by its group id, whose nodes the provider finds
by their group label), with its inputs as its last known outputs, so the refresh that follows
reads it back from the cloud: what exists is kept with what the cloud says, what does not is
dropped by the provider's own read, and the run carries on from there (nothing is made twice,
nothing the cloud has is forgotten). A create whose resource cannot be looked up by ID (a
generated key, a secret's version) made nothing another run would miss and is dropped. The
settled state goes back with `pulumi stack import`, which the stack's lock guards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from infra.dynamic_types import CLUSTER_SWEEPER_TYPE, LEGACY_TYPE, WORKER_GROUP_TYPE
from ops.pulumi_types import INSTANCE_TYPE, TPU_VM_TYPE

Inputs = Mapping[str, Any]


def _in_project(path: str) -> Callable[[Inputs], str]:
    return lambda inputs: f"projects/{inputs['project']}/{path.format(**inputs)}"


ID_OF: dict[str, Callable[[Inputs], str]] = {
    # terraform-provider-google's `id` of each: what its read (and `pulumi import`) takes
    INSTANCE_TYPE: _in_project("zones/{zone}/instances/{name}"),
    TPU_VM_TYPE: _in_project("locations/{zone}/nodes/{name}"),
    "gcp:compute/firewall:Firewall": _in_project("global/firewalls/{name}"),
    "gcp:compute/disk:Disk": _in_project("zones/{zone}/disks/{name}"),
    "gcp:compute/router:Router": _in_project("regions/{region}/routers/{name}"),
    "gcp:serviceaccount/account:Account": lambda inputs: (
        f"projects/{inputs['project']}/serviceAccounts/{inputs['accountId']}@"
        f"{inputs['project']}.iam.gserviceaccount.com"),
    "gcp:secretmanager/secret:Secret": _in_project("secrets/{secretId}"),
    "gcp:storage/bucket:Bucket": lambda inputs: str(inputs["name"]),
}


def _dynamic_id(inputs: Inputs) -> str | None:
    """A worker group's ID (its provider finds its nodes by label, whatever the ID) or the
    sweeper's; None for the other dynamic resources (keys, secrets: nothing in the cloud)."""
    from infra.workers.naming import resource_id
    from infra.workers.sweeper import sweeper_id

    if "node_type" in inputs and "body" in inputs:
        return resource_id(inputs)
    if "cluster_name" in inputs and "node_type" not in inputs and "body" not in inputs:
        return sweeper_id(inputs)
    return None


def adopted_id(resource: Mapping[str, Any]) -> str | None:
    """The ID a pending create's resource has if the cloud holds it; None when it has none to
    look up."""
    kind, inputs = resource.get("type", ""), resource.get("inputs") or {}
    try:
        if kind in (WORKER_GROUP_TYPE, CLUSTER_SWEEPER_TYPE, LEGACY_TYPE):
            return _dynamic_id(inputs)
        make = ID_OF.get(kind)
        return make(inputs) if make else None
    except (KeyError, TypeError):
        return None  # an input the ID needs was not recorded


class StateStack(Protocol):
    def export_stack(self) -> Any: ...

    def import_stack(self, state: Any) -> None: ...


@dataclass(frozen=True)
class Settled:
    found: bool
    """There were pending operations (the caller refreshes before acting, so the adopted ones
    are read back)."""
    deployment: dict[str, Any]
    """The state as it now is (what the orphans are judged against: ops/cloud/orphans.py)."""


def settle(stack: StateStack, out: TextIO) -> Settled:
    """Settle the pending operations a killed run left (module docstring). What was
    found is said once the settled state is in: a run still going holds the stack's lock, so
    its pending operations fail the import with the lock's one line, and nothing is said of
    them."""
    exported = stack.export_stack()
    deployment = dict(exported.deployment)
    pending = deployment.get("pending_operations") or []
    if not pending:
        return Settled(False, deployment)
    said = [f"the state holds {len(pending)} pending operation(s) a run killed half way left:"]
    resources = list(deployment.get("resources") or [])
    known = {r["urn"] for r in resources if not r.get("delete")}
    for operation in pending:
        resource = operation["resource"]
        urn, kind = resource["urn"], operation.get("type", "")
        short = urn.rsplit("::", 1)[-1]
        if kind != "creating" or urn in known:
            said.append(f"  {kind} {short}: the refresh reads it back")
            continue
        found = adopted_id(resource)
        if found is None:
            said.append(f"  creating {short}: made nothing another run would miss: dropped")
            continue
        resources.append({**resource, "id": found, "custom": True,
                          "outputs": dict(resource.get("inputs") or {})})
        known.add(urn)
        said.append(f"  creating {short}: adopted as {found}; the refresh reads it from the "
                    "cloud (kept if there, dropped if not)")
    deployment["resources"] = resources
    deployment["pending_operations"] = []
    exported.deployment = deployment
    stack.import_stack(exported)
    said.append("  settled: the run goes on from what the cloud has")
    print("\n".join(said), file=out, flush=True)
    return Settled(True, deployment)
