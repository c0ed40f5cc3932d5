"""Orphans: what the cloud holds of a cluster that no state of its stack knows.

A run killed before its create was recorded, a state lost or rolled back, a node made by hand:
each leaves a resource that carries the cluster's labels (`ray-cluster-name`) or the names the
program gives (the worker account `ray-<cluster>-worker`, the bucket, firewall rules aimed at
the cluster's network tags) while the stack's state has no entry for it. Pulumi never looks at
it again: it is billed and forgotten, or it makes the next `up` fail (`409 already exists`).

`find_orphans` lists the cluster's resources (instances in every zone by label, TPU nodes and
queued resources in the cluster's zone, the project's firewall rules by target tag, the worker
account and the bucket by name) and compares them with the state (`pulumi stack export`):

- known: an ID or name the state holds, or a worker whose `ray-gcp-group` label names a worker
  group of the state (the group's read takes it in), or a worker Ray's autoscaler launched while
  the state has the cluster's head (the head's autoscaler keeps it);
- a pending create a killed run left: `invoke up` adopts it (ops/lifecycle/pending.py);
- else an orphan: `invoke orphans --delete` deletes it, after asking, only for the stack the
  user names.

Read only, but for `delete_orphans`; each call retried as the worker groups' calls are
(infra/workers/retry.py: 429, 5xx, rate-limit 403s, Retry-After honoured).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from model.config import ClusterConfig
from model.identities import bucket_name, worker_account_email
from model.labels import CLUSTER_NAME, KIND_HEAD, KIND_WORKER, NODE_KIND, USER_NODE_TYPE
from ops.cloud.cloud_api import rest_session, rest_url
from ops.errors import OpsError
from ops.stacks.cloud_nodes import api_errors

BASES = {"compute": "https://compute.googleapis.com/compute/v1",
         "tpu": "https://tpu.googleapis.com/v2",
         "iam": "https://iam.googleapis.com/v1",
         "storage": "https://storage.googleapis.com/storage/v1"}
TIMEOUT_S = 60.0
INSTANCE_TYPES = ("gcp:compute/instance:Instance", "gcp:tpu/v2Vm:V2Vm")
NAME_LISTS = ("instance_names", "stopped_instance_names", "node_names")
GROUP_LABEL = "ray-gcp-group"  # infra/workers/naming.py: the worker group a node belongs to


@dataclass(frozen=True)
class CloudResource:
    """One resource of the cluster as its API lists it."""

    kind: str
    """instance, TPU node, queued resource, firewall rule, service account, bucket."""
    name: str
    where: str
    """Its zone, `global` or the project."""
    api: str
    path: str
    """Its REST path under the API's base: what reads and deletes it."""
    labels: Mapping[str, str]


@dataclass(frozen=True)
class Orphan:
    resource: CloudResource
    why: str
    command: str

    def line(self) -> str:
        found = self.resource
        return f"orphan: {found.kind} {found.name} in {found.where}: {self.why}; {self.command}"


@dataclass
class StateKnows:
    """What a stack's exported state knows of the cloud."""

    names: set[str]
    groups: set[str]
    pending: set[str]
    """Names of the creates a killed run left pending (`_pending_names`)."""

    @classmethod
    def of(cls, deployment: Mapping[str, Any]) -> StateKnows:
        names: set[str] = set()
        groups: set[str] = set()
        for resource in deployment.get("resources") or []:
            if resource.get("delete"):
                continue
            names |= _names_of(resource)
            outputs = resource.get("outputs") or {}
            if outputs.get("group_id"):
                groups.add(str(outputs["group_id"]))
            elif isinstance(outputs.get("node_type"), str) and "body" in outputs:
                # adopted from a pending create, not read back yet: its read takes the nodes
                # its group label names, which the (maybe encrypted) body alone tells
                groups.add(f"group:{outputs['node_type']}")
        pending: set[str] = set()
        for operation in deployment.get("pending_operations") or []:
            if operation.get("type") == "creating":
                pending |= _pending_names(operation.get("resource") or {})
        return cls(names, groups, pending)


def _names_of(resource: Mapping[str, Any]) -> set[str]:
    outputs, inputs = resource.get("outputs") or {}, resource.get("inputs") or {}
    found = {str(resource.get("id") or "").rsplit("/", 1)[-1]}
    for source in (outputs, inputs):
        found |= {str(source[key]) for key in ("name", "email", "accountId")
                  if isinstance(source.get(key), str)}
    for key in NAME_LISTS:
        found |= {str(name) for name in outputs.get(key) or []}
    return found - {""}


def _pending_names(resource: Mapping[str, Any]) -> set[str]:
    """The names a pending create makes; for a worker group, `group:<node type>` (its group id
    is a digest of its body, which the exported state may hold encrypted)."""
    inputs = resource.get("inputs") or {}
    found = {str(inputs[key]) for key in ("name", "accountId") if isinstance(inputs.get(key), str)}
    if isinstance(inputs.get("node_type"), str) and "body" in inputs:
        found.add(f"group:{inputs['node_type']}")
    return found


class _Rest:
    """Google's REST APIs as the stack's identity, at RAY_GCP_API_ENDPOINT when set."""

    def __init__(self, config: ClusterConfig) -> None:
        self.session, self.endpoint = rest_session(config)

    def url(self, api: str, path: str) -> str:
        return rest_url(self.endpoint, BASES[api], path)

    def call(self, verb: str, api: str, path: str, params: Mapping[str, str] | None = None,
             missing_ok: bool = False) -> Any:
        """One call, retried on transient faults; a 404 is None when `missing_ok`."""
        from google.api_core import exceptions

        from infra.workers.retry import RetryPolicy, call_with_retry

        def once() -> Any:
            answer = self.session.request(verb, self.url(api, path), params=dict(params or {}),
                                          timeout=TIMEOUT_S)
            if answer.status_code == 404 and missing_ok:
                return None
            if answer.status_code >= 400:
                raise exceptions.from_http_response(answer)
            return answer.json() if answer.content else {}

        return call_with_retry(once, RetryPolicy(deadline_s=120.0))

    def pages(self, api: str, path: str, key: str,
              params: Mapping[str, str] | None = None) -> list[Any]:
        """Every page's `key` items (an aggregated list's `items` map: one per page)."""
        items: list[Any] = []
        token = ""
        while True:
            page = self.call("GET", api, path, {**(params or {}),
                                                **({"pageToken": token} if token else {})})
            found = page.get(key) or []
            items += [found] if isinstance(found, dict) else found
            token = page.get("nextPageToken") or ""
            if not token:
                return items


def cluster_resources(config: ClusterConfig, rest: _Rest) -> list[CloudResource]:
    """Everything of `config`'s cluster the cloud holds (module docstring)."""
    project, zone, cluster = (config.provider.project, config.provider.availability_zone,
                              config.cluster_name)
    found: list[CloudResource] = []
    scopes = rest.pages("compute", f"projects/{project}/aggregated/instances", "items",
                        {"filter": f"labels.{CLUSTER_NAME} = {cluster}"})
    for scope, entry in sorted(((scope, entry) for page in scopes
                                for scope, entry in page.items()), key=lambda pair: pair[0]):
        where = scope.rsplit("/", 1)[-1]
        for instance in entry.get("instances") or []:
            labels = instance.get("labels") or {}
            if labels.get(CLUSTER_NAME) == cluster:
                found.append(CloudResource(
                    "instance", instance["name"], where, "compute",
                    f"projects/{project}/zones/{where}/instances/{instance['name']}", labels))
    if _has_tpu(config):
        location = f"projects/{project}/locations/{zone}"
        for node in rest.pages("tpu", f"{location}/nodes", "nodes"):
            labels = node.get("labels") or {}
            if labels.get(CLUSTER_NAME) == cluster:
                name = node["name"].rsplit("/", 1)[-1]
                found.append(CloudResource("TPU node", name, zone, "tpu",
                                           f"{location}/nodes/{name}", labels))
        for queued in rest.pages("tpu", f"{location}/queuedResources", "queuedResources"):
            name = queued["name"].rsplit("/", 1)[-1]
            if name.startswith(f"ray-{cluster}-"):
                found.append(CloudResource("queued resource", name, zone, "tpu",
                                           f"{location}/queuedResources/{name}", {}))
    tags = {f"ray-{cluster}", f"ray-{cluster}-head"}  # model/plan.py's FirewallPlan
    for rule in rest.pages("compute", f"projects/{project}/global/firewalls", "items"):
        if tags & set(rule.get("targetTags") or ()):
            found.append(CloudResource("firewall rule", rule["name"], "global", "compute",
                                       f"projects/{project}/global/firewalls/{rule['name']}", {}))
    email = worker_account_email(config)
    account_path = f"projects/{project}/serviceAccounts/{email}"
    if rest.call("GET", "iam", account_path, missing_ok=True) is not None:
        found.append(CloudResource("service account", email, project, "iam", account_path, {}))
    bucket = bucket_name(config)
    if rest.call("GET", "storage", f"b/{bucket}", missing_ok=True) is not None:
        found.append(CloudResource("bucket", bucket, project, "storage", f"b/{bucket}", {}))
    return found


def _has_tpu(config: ClusterConfig) -> bool:
    from model.config import TpuNodeConfig

    return any(isinstance(node_type.node_config, TpuNodeConfig)
               for node_type in config.available_node_types.values())


def judge(stack: str, found: Iterable[CloudResource], knows: StateKnows) -> list[Orphan]:
    """The resources `knows` does not account for, each with why and what to do."""
    head_known = any(resource.labels.get(NODE_KIND) == KIND_HEAD and resource.name in knows.names
                     for resource in found)
    orphans = []
    for resource in found:
        group = resource.labels.get(GROUP_LABEL)
        if resource.name in knows.names or (group and group in knows.groups):
            continue
        autoscaled = resource.labels.get(NODE_KIND) == KIND_WORKER and not group
        if autoscaled and head_known:
            continue  # the head's autoscaler launched it and keeps it
        of_type = f"group:{resource.labels.get(USER_NODE_TYPE)}" if group else ""
        if of_type in knows.groups:
            continue
        if resource.name in knows.pending or of_type in knows.pending:
            orphans.append(Orphan(resource, "the state holds its create pending (a run killed "
                                  "half way)", f"`invoke up -s {stack}` adopts it"))
            continue
        why = ("a worker Ray's autoscaler launched, and the state has no head to keep it"
               if autoscaled else "no state of the stack knows it (a run killed before its "
               "create was recorded, a lost state, or made by hand)")
        orphans.append(Orphan(resource, why, f"`invoke orphans -s {stack} --delete` deletes "
                              "it (it asks first)"))
    return orphans


def find_orphans(stack: str, config: ClusterConfig,
                 deployment: Mapping[str, Any]) -> list[Orphan]:
    """The cluster's orphans (module docstring); OpsError in one line when the APIs fail."""
    with api_errors("looking for orphans"):
        found = cluster_resources(config, _Rest(config))
    return judge(stack, found, StateKnows.of(deployment))


def report_orphans(stack: str, config: ClusterConfig, deployment: Mapping[str, Any],
                   out: TextIO) -> list[Orphan]:
    """One line per orphan on `out`; a failed look is one line too, never the task's end."""
    try:
        orphans = find_orphans(stack, config, deployment)
    except OpsError as exc:
        print(f"{exc} (the task goes on)", file=out, flush=True)
        return []
    for orphan in orphans:
        print(orphan.line(), file=out, flush=True)
    return orphans


def delete_orphans(stack: str, config: ClusterConfig, deployment: Mapping[str, Any],
                   yes: bool, out: TextIO, ask: Callable[[str], str] = input) -> None:
    """`invoke orphans --delete`: the stack's orphans (not the pending creates `up` adopts)
    listed, the user asked (`-y` skips), then each deleted and waited for."""
    from ops.confirm import confirm

    orphans = [orphan for orphan in find_orphans(stack, config, deployment)
               if "--delete" in orphan.command]
    if not orphans:
        print(f"stack {stack!r}: no orphan to delete", file=out, flush=True)
        return
    listing = "\n".join(f"  {o.resource.kind} {o.resource.name} in {o.resource.where}"
                        for o in orphans)
    confirm(f"delete {len(orphans)} orphan(s) of cluster {config.cluster_name!r} (project "
            f"{config.provider.project}) that no state of stack {stack!r} knows:\n{listing}",
            yes, ask, out)
    rest = _Rest(config)
    for orphan in orphans:
        _delete(rest, orphan.resource)
        print(f"deleted {orphan.resource.kind} {orphan.resource.name}", file=out, flush=True)


DELETE_WAIT_S = 600.0


def _delete(rest: _Rest, resource: CloudResource) -> None:
    """Delete one resource and wait until it is gone (a bucket emptied first)."""
    if resource.api == "storage":
        for item in rest.pages("storage", f"{resource.path}/o", "items", {"versions": "true"}):
            rest.call("DELETE", "storage", f"{resource.path}/o/{_quoted(item['name'])}",
                      {"generation": str(item.get("generation", ""))}, missing_ok=True)
    rest.call("DELETE", resource.api, resource.path, missing_ok=True)
    deadline = time.monotonic() + DELETE_WAIT_S
    while rest.call("GET", resource.api, resource.path, missing_ok=True) is not None:
        if time.monotonic() > deadline:
            raise OpsError(f"{resource.kind} {resource.name} was still there "
                           f"{DELETE_WAIT_S:.0f} s after its delete: run this again")
        time.sleep(1.0)


def _quoted(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")



def stack_orphans(stack: str, out: TextIO) -> list[Orphan]:
    """`invoke status`'s look: the stack's state exported (`pulumi stack export`), then
    `report_orphans`; a stack whose state cannot be read is one line, not a failure."""
    from pulumi import automation as auto

    from ops.stacks.stack import Stack, select_stack

    try:
        chosen = Stack.of(stack)
        deployment = dict(select_stack(chosen.name).export_stack().deployment)
    except (OpsError, auto.CommandError) as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        print(f"orphans not looked for: the stack's state could not be read ({reason})",
              file=out, flush=True)
        return []
    return report_orphans(chosen.name, chosen.cluster, deployment, out)


def show_orphans(stack: str | None, delete: bool, yes: bool, out: TextIO) -> None:
    """`invoke orphans`: list the stack's orphans, or with `delete` delete them, only for a
    stack the user named (`-s`/`-c`: never the folder's only stack by default) and after
    asking."""
    from ops.stacks.stack import Stack, select_stack

    if delete and not stack:
        raise OpsError("--delete deletes cloud resources: name the cluster's stack with -s "
                       "NAME (or -c its YAML)")
    chosen = Stack.choose(stack)
    deployment = dict(select_stack(chosen.name).export_stack().deployment)
    if delete:
        delete_orphans(chosen.name, chosen.cluster, deployment, yes, out)
        return
    found = find_orphans(chosen.name, chosen.cluster, deployment)
    for orphan in found:
        print(orphan.line(), file=out)
    if not found:
        print(f"stack {chosen.name!r}: no orphan: the cloud holds nothing of cluster "
              f"{chosen.cluster.cluster_name!r} its state does not know", file=out)
