"""`invoke status`: which of the stack's nodes the cloud preempted, and when, or that vanished.

GCE records a preemption as a zone operation of type `compute.instances.preempted` whose
target is the instance (zoneOperations.list with that filter, as Google's "list preemption
history" sample does); its insertTime is when. A preempted VM stays TERMINATED, or is gone when
it was deleted on preemption (spot with instanceTerminationAction DELETE). A TPU VM shows state
PREEMPTED, but the TPU API records no time for it (no Node field, no operation), so its line
says so. The stack outputs know what should exist; the APIs say what does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ops.cloud.cloud_api import StackApi
from ops.errors import OpsError
from ops.stacks.cloud_nodes import api_errors
from ops.stacks.stack import StackOutputs

if TYPE_CHECKING:
    from infra.workers.clients import ApiClients

PREEMPTED_OPERATION = "compute.instances.preempted"
GONE = "gone"
CHECKING = "checking the nodes for preemptions"  # what failed, when the APIs did not answer


@dataclass(frozen=True)
class Fate:
    """What the cloud says of one node that is not simply there."""

    name: str
    state: str
    """Compute status, TPU state, or "gone"."""
    preempted: bool
    at: datetime | None = None


def compute_fates(
    clients: ApiClients, project: str, zone: str, names: list[str]
) -> list[Fate]:
    """The named instances of one zone that were preempted or are gone."""
    from infra.workers.retry import INTERACTIVE

    pattern = "|".join(names)
    listed = {
        i["name"]: i
        for i in clients.compute.items("instances.list", INTERACTIVE, project=project,
                                       zone=zone, filter=f'name eq "({pattern})"')
    }
    preempted: dict[str, datetime] = {}
    wanted = f'operationType = "{PREEMPTED_OPERATION}"'
    for operation in clients.compute.items("zoneOperations.list", INTERACTIVE,
                                           project=project, zone=zone, filter=wanted):
        if not operation.get("insertTime"):
            continue
        name = operation.get("targetLink", "").rsplit("/", 1)[-1]
        when = datetime.fromisoformat(operation["insertTime"])
        preempted[name] = max(when, preempted.get(name, when))
    fates = []
    for name in names:
        instance = listed.get(name)
        at = preempted.get(name)
        # A node made again after its preemption (same name) was not preempted itself.
        made = instance.get("creationTimestamp", "") if instance is not None else ""
        if at is not None and made and datetime.fromisoformat(made) > at:
            at = None
        if at is not None:
            state = instance.get("status", "") if instance is not None else GONE
            fates.append(Fate(name, state, True, at))
        elif instance is None:
            fates.append(Fate(name, GONE, False))
    return fates


def tpu_fates(clients: ApiClients, project: str, zone: str, names: list[str]) -> list[Fate]:
    """The named TPU VMs of one zone that are PREEMPTED or gone."""
    from google.cloud import tpu_v2

    from infra.workers.retry import with_retry

    states = {
        node.name.rsplit("/", 1)[-1]: tpu_v2.Node.State(node.state).name
        for node in with_retry(lambda: list(clients.tpu.list_nodes(
            parent=f"projects/{project}/locations/{zone}", retry=None
        )))
    }
    fates = []
    for name in names:
        state = states.get(name, GONE)
        if state == "PREEMPTED" or state == GONE:
            fates.append(Fate(name, state, state == "PREEMPTED"))
    return fates


def node_fates(outputs: StackOutputs, clients: ApiClients) -> list[Fate]:
    """Every node of the outputs that the Compute or TPU API calls preempted or gone."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node in outputs.nodes:
        groups.setdefault((node.zone or outputs.zone, node.api), []).append(node.name)
    fates = []
    for (zone, api), names in sorted(groups.items()):
        read = tpu_fates if api == "tpu" else compute_fates
        fates += read(clients, outputs.project, zone, names)
    return fates


def ago(then: datetime, now: datetime) -> str:
    minutes = max(int((now - then).total_seconds() // 60), 0)
    if minutes < 60:
        return f"{minutes}m ago"
    return f"{minutes // 60}h ago" if minutes < 48 * 60 else f"{minutes // (24 * 60)}d ago"


def describe(fate: Fate, now: datetime) -> str:
    if fate.preempted and fate.at is not None:
        when = fate.at.astimezone(timezone.utc)
        text = f"preempted {when:%Y-%m-%d %H:%M} UTC ({ago(when, now)})"
    elif fate.preempted:
        text = "preempted (time unknown: the TPU API records none)"
    else:
        text = "gone: not in the API any more (deleted, or reclaimed)"
    if fate.preempted:
        text += ", now gone" if fate.state == GONE else f", now {fate.state}"
    return text


def preemption_lines(api: StackApi, now: datetime | None = None) -> list[str]:
    """Lines for `invoke status` under the nodes table; the one line `api_errors` words when
    the APIs cannot be asked. Nothing when every node is where the outputs say."""
    outputs = api.outputs
    if not outputs.nodes:
        return []
    try:
        with api_errors(CHECKING):
            fates = node_fates(outputs, api.clients)
    except OpsError as exc:
        return [str(exc)]
    return _render(fates, now or datetime.now(timezone.utc), outputs.stack)


def _render(fates: Iterable[Fate], now: datetime, stack: str) -> list[str]:
    fates = list(fates)
    if not fates:
        return []
    width = max(len(fate.name) for fate in fates)
    return [
        "preempted or gone (Compute/TPU API):",
        *(f"  {fate.name.ljust(width)}  {describe(fate, now)}" for fate in fates),
        f"  `invoke up --stack {stack}` replaces them",
    ]
