"""Orphans the program itself would make, taken into the state before `up` acts.

A create whose answer was lost (a connection cut after Google made the resource: pulumi-gcp
does not resend a POST) fails the run and leaves no trace in the state, so the next `up` asks
for it again and meets `409 already exists` on every run. When the resource has the name the
program gives it (the head, a TPU slice, the worker account, the bucket), the orphan is that
very resource: the `up` previews to learn each create's URN and inputs, and an orphan under
the ID a planned create would get (ops/lifecycle/pending.py's `adopted_id`, the provider's own
`id`) is entered into the state as a pending create is adopted. The refresh every `up` makes
first then reads it back from the cloud, and the up updates it to what the program says,
nothing made twice. Autonamed resources (the firewall rules) get a new name on every create,
so theirs stay orphans for `invoke orphans --delete`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TextIO

from ops.cloud.orphans import Orphan
from ops.lifecycle.pending import adopted_id

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's unknown value in a preview


class PreviewStack(Protocol):
    def preview(self, **kwargs: Any) -> Any: ...

    def export_stack(self) -> Any: ...

    def import_stack(self, state: Any) -> None: ...


def _cloud_id(orphan: Orphan) -> str:
    found = orphan.resource
    return found.name if found.api == "storage" else found.path


def _known(value: Any) -> bool:
    if isinstance(value, str):
        return UNKNOWN not in value
    if isinstance(value, Mapping):
        return all(_known(item) for item in value.values())
    if isinstance(value, list):
        return all(_known(item) for item in value)
    return True


def planned_creates(stack: PreviewStack) -> list[dict[str, Any]]:
    """The creates a preview of the program plans: URN, type, parent, provider, inputs."""
    creates: list[dict[str, Any]] = []

    def collect(event: Any) -> None:
        pre = getattr(event, "resource_pre_event", None)
        metadata = getattr(pre, "metadata", None)
        if metadata is None or getattr(metadata.op, "value", metadata.op) != "create":
            return
        new = metadata.new
        if new is None or not new.custom:
            return
        creates.append({"urn": new.urn, "type": new.type, "parent": new.parent,
                        "provider": new.provider or metadata.provider,
                        "inputs": dict(new.inputs or {})})

    stack.preview(on_event=collect)
    return creates


def adopt_wanted(stack: PreviewStack, orphans: Iterable[Orphan], out: TextIO) -> bool:
    """Take into the state each orphan a planned create names (module docstring); whether any
    was."""
    wanted = {_cloud_id(orphan): orphan for orphan in orphans if "--delete" in orphan.command}
    if not wanted:
        return False
    exported = stack.export_stack()
    deployment = dict(exported.deployment)
    resources = list(deployment.get("resources") or [])
    present = {resource["urn"] for resource in resources}
    said = []
    for create in planned_creates(stack):
        found = adopted_id(create)
        orphan = wanted.get(found or "")
        if (orphan is None or create["urn"] in present or create["parent"] not in present
                or not _known(create["provider"])):
            continue
        inputs = {key: value for key, value in create["inputs"].items() if _known(value)}
        resources.append({"urn": create["urn"], "type": create["type"], "id": found,
                          "custom": True, "parent": create["parent"],
                          "provider": create["provider"], "inputs": inputs,
                          "outputs": dict(inputs)})
        present.add(create["urn"])
        said.append(f"  adopted {orphan.resource.kind} {orphan.resource.name}: the program "
                    "makes it under this name; the refresh reads it back")
    if not said:
        return False
    deployment["resources"] = resources
    exported.deployment = deployment
    stack.import_stack(exported)
    print("\n".join(said), file=out, flush=True)
    return True
