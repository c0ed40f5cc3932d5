"""Preempted TPU slices, replaced by the next `invoke up`.

GCP reclaims a spot or preemptible TPU VM by putting it in state PREEMPTED (or deleting it).
Its `tpu.V2Vm` inputs have not changed, so a bare `pulumi up` leaves a PREEMPTED slice as it
is, and recreates a vanished one only after a refresh. `invoke up` therefore asks the TPU API
for the state of every slice the stack's state keeps, and runs one up that refreshes first
(`pulumi up --refresh`: the refresh and the update in one engine run, so the engine, its
plugins and the state are loaded once; a vanished slice leaves the state and the up recreates
it) with the reclaimed ones' URNs in `replace` (the engine accepts a URN the up creates).
Queued slices (`provider.tpu_queued_resources`) are found and replaced the same way: replacing
one withdraws its SUSPENDED request and queues a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from infra.dynamic_types import LEGACY_TYPE, QUEUED_TPU_SLICE_TYPE
from ops.pulumi_types import TPU_VM_TYPE
from ops.stacks.stack import cluster_credentials

# URNs name their parents' types: the worker slices live under a TpuSlices component. A TPU
# head is not replaced here: it is replaced create-before-delete, and its replacement would
# take the same name.
SLICE_URN_TYPES = f"ray-gcp:index:TpuSlices${TPU_VM_TYPE}::"
# With provider.tpu_queued_resources a slice is a queued request (a dynamic resource); once GCP
# reclaims its node the request is SUSPENDED and the node gone, so it is replaced the same way.
QUEUED_SLICE_URN_TYPES = f"ray-gcp:index:TpuSlices${QUEUED_TPU_SLICE_TYPE}::"
# A stack last updated before the dynamic resources had their own types has the shared one in
# its URNs. Until an up records the new URN, the engine ignores a `replace` naming the old one
# and refuses one naming the new one.
LEGACY_QUEUED_SLICE_URN_TYPES = f"ray-gcp:index:TpuSlices${LEGACY_TYPE}::"
SLICE_KINDS = (SLICE_URN_TYPES, QUEUED_SLICE_URN_TYPES, LEGACY_QUEUED_SLICE_URN_TYPES)
RECLAIMED = frozenset({"PREEMPTED", "TERMINATED"})
GONE = "gone"


@dataclass(frozen=True)
class KeptSlice:
    """A TPU worker slice in the stack's state."""

    urn: str
    name: str
    project: str
    zone: str


def kept_slices(deployment: Mapping[str, Any]) -> list[KeptSlice]:
    """The TPU worker slices of an exported stack state (`pulumi stack export`)."""
    return [
        KeptSlice(
            urn=resource["urn"],
            name=resource["outputs"]["name"],
            project=resource["outputs"]["project"],
            zone=resource["outputs"]["zone"],
        )
        for resource in deployment.get("resources") or []
        if any(kind in resource.get("urn", "") for kind in SLICE_KINDS)
        and not resource.get("delete")
    ]


def reclaimed(
    slices: Iterable[KeptSlice], states: Mapping[tuple[str, str], Mapping[str, str]]
) -> list[tuple[KeptSlice, str]]:
    """The slices to replace, with why: PREEMPTED, TERMINATED, or gone from the TPU API.
    `states` maps (project, zone) to node name -> state."""
    found = []
    for kept in slices:
        state = states.get((kept.project, kept.zone), {}).get(kept.name, GONE)
        if state in RECLAIMED or state == GONE:
            found.append((kept, state))
    return found


def tpu_states(
    slices: Iterable[KeptSlice], credentials: str | None, api_endpoint: str | None = None
) -> dict[tuple[str, str], dict[str, str]]:
    """Every TPU node's state in the slices' zones, one list call a zone."""
    from infra.workers.apis import Deadlines, node_api
    from infra.workers.retry import RetryPolicy

    states: dict[tuple[str, str], dict[str, str]] = {}
    for project, zone in sorted({(s.project, s.zone) for s in slices}):
        props = {
            "project": project,
            "zone": zone,
            "credentials": credentials,
            "api_endpoint": api_endpoint,
        }
        api = node_api("tpu", props, RetryPolicy(), Deadlines())
        states[(project, zone)] = {node.name: node.status for node in api.list_nodes({})}
    return states


class UpStack(Protocol):
    """What `up_replacing_reclaimed` needs of an Automation API stack."""

    def export_stack(self) -> Any: ...

    def get_all_config(self) -> Mapping[str, Any]: ...

    def up(self, *, on_event: Callable[..., None], replace: list[str] | None,
           refresh: bool | None = None, run_program: bool | None = None,
           **options: Any) -> Any: ...


def up_replacing_reclaimed(
    stack: UpStack, on_event: Callable[..., None], out: TextIO, api_endpoint: str | None = None,
    up_options: Mapping[str, Any] | None = None, deployment: Mapping[str, Any] | None = None,
) -> UpDone:
    """One up that refreshes first, with every reclaimed TPU slice replaced (and `up_options`,
    e.g. the policy pack, passed on): the replaced URNs and the stack's outputs after it.
    `deployment`: the stack's state as the caller just exported it (else it is exported
    here)."""
    if deployment is None:
        deployment = stack.export_stack().deployment
    slices = kept_slices(deployment)
    found: list[tuple[KeptSlice, str]] = []
    if slices:
        config = {key: value.value for key, value in stack.get_all_config().items()}
        try:
            states = tpu_states(slices, cluster_credentials(config), api_endpoint)
        except _api_errors() as exc:
            # The up itself may still do what was asked: say why nothing is replaced.
            reason = getattr(exc, "message", None) or str(exc)
            print(
                f"  warning: could not ask the TPU API whether slices were preempted ({reason}); "
                "the up replaces none",
                file=out,
                flush=True,
            )
            states = None
        found = reclaimed(slices, states) if states is not None else []
    for kept, state in found:
        print(f"  replace  {kept.name} (TPU slice {state})", file=out, flush=True)
    targets = [kept.urn for kept, _ in found]
    if any(LEGACY_QUEUED_SLICE_URN_TYPES in urn for urn in targets):
        print("  the stack's state predates the slices' own type: one up records it, the "
              "next replaces them", file=out, flush=True)
        stack.up(on_event=on_event, replace=None, refresh=True, run_program=True,
                 **(up_options or {}))
        targets = [urn.replace(LEGACY_QUEUED_SLICE_URN_TYPES, QUEUED_SLICE_URN_TYPES)
                   for urn in targets]
        result = stack.up(on_event=on_event, replace=targets or None, **(up_options or {}))
        return UpDone(targets, plain_outputs(result))
    result = stack.up(on_event=on_event, replace=targets or None, refresh=True,
                      run_program=True, **(up_options or {}))
    return UpDone(targets, plain_outputs(result))


@dataclass(frozen=True)
class UpDone:
    replaced: list[str]
    """The reclaimed slices' URNs the up replaced."""
    outputs: dict[str, Any]
    """The stack's outputs as the up left them, secrets in the clear (in memory only)."""


def plain_outputs(result: Any) -> dict[str, Any]:
    """An Automation API UpResult's outputs as `pulumi stack output --json --show-secrets`
    prints them: the API read them so (and the secret ones with `--show-secrets`) at the end
    of its up."""
    return {key: output.value for key, output in result.outputs.items()}


def _api_errors() -> tuple[type[Exception], ...]:
    """What asking the TPU API may fail with, after the client's retries."""
    import requests
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError

    return (GoogleAPIError, GoogleAuthError, requests.ConnectionError)
