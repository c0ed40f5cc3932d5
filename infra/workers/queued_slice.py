"""`QueuedTpuSlice`: one TPU worker slice requested through the TPU queued-resources API,
for stacks with `provider.tpu_queued_resources` (see queued_api.py for the API).

pulumi-gcp's `tpu.V2QueuedResource` cannot carry the node's metadata, labels, accelerator
config or service account, so a slice made with it would never run our startup script or join
Ray; this dynamic resource sends the full node body instead.

create queues the request (or finds the one an earlier `up` queued under the same name) and
waits, at most `wait_minutes`, until it is ACTIVE: then the node exists and the slice counts.
Past the bound it raises, naming the request's state, and leaves the request queued: Pulumi
records nothing for a failed create, so the next `up` finds it by name and waits again rather
than queueing a duplicate, and `down` (the cluster sweeper) withdraws it. A FAILED or
SUSPENDED request (GCP reclaimed the spot node) is replaced by a new one on the next create.
New metadata (a changed startup script) or labels go to the node in place (`nodes.patch`),
as on a V2Vm slice, so the slice keeps its capacity; any other change queues a new request.
delete withdraws the request with `force`, which deletes its node too.

The provider object holds no state or secrets (it is pickled into the stack); credentials and
the endpoint come with each call's properties.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi.dynamic import (
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    UpdateResult,
)

from infra.dynamic_types import MODULE, legacy_aliases
from infra.workers.apis import ApiProvider, queued_slices, replacing_diff
from infra.workers.capacity import CAPACITY_LABEL
from infra.workers.queued_api import (
    ACTIVE,
    DEAD,
    DELETING,
    QueuedRequest,
    QueuedSlices,
    QueuedSliceTimeout,
    request_body,
    rung_request,
)

# What the request asks for: a change queues a new one (the old one is withdrawn first),
# but for the node's metadata (a new startup script) and labels: the node is updated in
# place, as a V2Vm slice is, and keeps its capacity.
REQUEST_KEYS = ("project", "zone", "name", "body")
BODY_IN_PLACE_KEYS = ("metadata", "labels")
# How long to wait and how to reach the API: only the next create reads them.
IN_PLACE_KEYS = ("wait_minutes", "valid_until_minutes", "credentials", "api_endpoint",
                 "capacity")
OUTPUT_KEYS = ("queued_state", "status", "internal_ip", "external_ip")
WAIT_KEY = "provider.tpu_queued_resources.wait_minutes"


class QueuedSliceError(RuntimeError):
    """The slice is not ACTIVE: still queued past the wait, FAILED, or suspended."""


class QueuedSliceProvider(ApiProvider):
    """CRUD of one queued TPU slice. Tests construct it with fast retries and polls."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        api = self._api(props)
        name = props["name"]
        existing = api.get(name)
        if existing is not None and existing.state == DELETING:
            api.wait_gone(name)
            existing = None
        if existing is not None and existing.state in DEAD:
            api.delete([name])  # never ACTIVE again: queue anew
            existing = None
        if existing is None and (props.get("capacity") or {}).get("ladder"):
            self._walk_ladder(api, props)
        elif existing is None:
            api.create(
                name,
                request_body(api.parent, name, props["body"], props.get("valid_until_minutes")),
            )
        request = self._wait(api, props)
        if not _asks_for(request, props):
            # Queued by an earlier up for another startup script or labels: it keeps its place
            # in the queue, and its node gets ours once it exists.
            body = props["body"]
            api.update_node(name, body.get("metadata") or {},
                            _with_rung(body.get("labels") or {}, request.labels))
        return CreateResult(
            f"{api.parent}/queuedResources/{name}", self._outputs(api, props, request)
        )

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return replacing_diff(olds, news, replaced_keys(olds, news), (*IN_PLACE_KEYS, "body"))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """New metadata or labels go to the node in place; the rest only matters to the
        next create."""
        old_body, new_body = olds.get("body") or {}, news.get("body") or {}
        if any(old_body.get(k) != new_body.get(k) for k in BODY_IN_PLACE_KEYS):
            api, name = self._api(news), news["name"]
            node = api.node(name)
            if node is None:
                raise QueuedSliceError(
                    f"TPU slice {name} has no node to update (GCP reclaimed it): `invoke up` "
                    "replaces the slice"
                )
            api.update_node(name, new_body.get("metadata") or {},
                            _with_rung(new_body.get("labels") or {}, node.labels))
        return UpdateResult({**_inputs(news), **{k: olds.get(k) for k in OUTPUT_KEYS}})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: the request's real state and its node's; a request that is gone leaves
        the state, so the next up queues it again."""
        api = self._api(props)
        request = api.get(props["name"])
        if request is None:
            return ReadResult(None, {})
        return ReadResult(id_, self._outputs(api, props, request))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        self._api(props).delete([props["name"]])

    # ------------------------------------------------------------------ internals

    def _walk_ladder(self, api: QueuedSlices, props: Mapping[str, Any]) -> None:
        """Queue the slice on each rung of its ladder in turn: a request that GCP fails (no
        capacity on that tier or in that reservation) or that is not ACTIVE within
        `provision_timeout` is withdrawn and the next rung's is queued under the same name;
        the last rung's request is left for `_wait`, as a slice without a ladder is."""
        name, policy = props["name"], props["capacity"]
        steps = [(rung, reservation) for rung in policy["ladder"]
                 for reservation in rung.get("reservations") or [None]]
        timeout_s = float(policy.get("provision_timeout_s")
                          or float(props["wait_minutes"]) * 60.0)
        for index, (rung, reservation) in enumerate(steps):
            api.create(name, rung_request(api.parent, name, props["body"],
                                          props.get("valid_until_minutes"), rung, reservation))
            if index == len(steps) - 1:
                return
            try:
                request = api.wait_active(name, timeout_s)
            except QueuedSliceTimeout:
                request = None
            if request is not None and request.state == ACTIVE:
                return
            api.delete([name])  # failed or still queued: withdrawn, never made twice
            api.wait_gone(name)

    def _api(self, props: Mapping[str, Any]) -> QueuedSlices:
        return queued_slices(props, self.retry, self.deadlines)

    @staticmethod
    def _wait(api: QueuedSlices, props: Mapping[str, Any]) -> QueuedRequest:
        name, minutes = props["name"], float(props["wait_minutes"])
        try:
            request = api.wait_active(name, minutes * 60.0)
        except QueuedSliceTimeout as exc:
            state = exc.request.state if exc.request else "gone"
            raise QueuedSliceError(
                f"TPU slice {name} is not ACTIVE after {minutes:g} min ({WAIT_KEY}): its queued "
                f"request is {state}. It stays queued: the next `invoke up` waits for the same "
                "request (raise wait_minutes to wait longer), `invoke down` withdraws it."
            ) from None
        if request is None:
            raise QueuedSliceError(
                f"TPU slice {name}: its queued request was deleted while `up` waited for it "
                "(by hand, or a `down` at the same time); run `invoke up` again to queue it."
            )
        if request.state != ACTIVE:
            why = f" ({request.reason})" if request.reason else ""
            raise QueuedSliceError(
                f"TPU slice {name}: GCP put its queued request in state {request.state}{why}. "
                "The next `invoke up` queues a new request; `invoke down` removes this one."
            )
        return request

    @staticmethod
    def _outputs(
        api: QueuedSlices, props: Mapping[str, Any], request: QueuedRequest
    ) -> dict[str, Any]:
        node = api.node(props["name"]) if request.state not in DEAD else None
        return {
            **_inputs(props),
            "queued_state": request.state,
            "status": node.status if node else "gone",
            "internal_ip": node.internal_ip if node else None,
            "external_ip": node.external_ip if node else None,
        }


def replaced_keys(olds: Mapping[str, Any], news: Mapping[str, Any]) -> list[str]:
    """The inputs whose change queues a new request: where and which slice, and its node
    body but for metadata and labels."""
    keys = [k for k in ("project", "zone", "name") if olds.get(k) != news.get(k)]
    if _fixed_body(olds.get("body")) != _fixed_body(news.get("body")):
        keys.append("body")
    return keys


def _fixed_body(body: Any) -> Any:
    if not isinstance(body, dict):
        return body
    return {k: v for k, v in body.items() if k not in BODY_IN_PLACE_KEYS}


def _asks_for(request: QueuedRequest, props: Mapping[str, Any]) -> bool:
    """Whether the request asked for this node's labels (besides the ladder's rung label)
    and metadata."""
    body = props["body"]
    labels = {k: v for k, v in request.labels.items() if k != CAPACITY_LABEL}
    return labels == dict(body.get("labels") or {}) and request.metadata == dict(
        body.get("metadata") or {}
    )


def _with_rung(labels: Mapping[str, str], current: Mapping[str, str]) -> dict[str, str]:
    """New labels for a node, keeping the rung label its ladder gave it."""
    rung = current.get(CAPACITY_LABEL)
    return {**labels, **({CAPACITY_LABEL: rung} if rung else {})}


def _inputs(props: Mapping[str, Any]) -> dict[str, Any]:
    return {key: props.get(key) for key in (*REQUEST_KEYS, *IN_PLACE_KEYS)}


@dataclass
class QueuedTpuSliceArgs:
    """One slice: its node name (also the request's id) and TPU v2 Node body with labels."""

    project: pulumi.Input[str]
    zone: pulumi.Input[str]
    name: pulumi.Input[str]
    body: pulumi.Input[dict[str, Any]]
    wait_minutes: int
    valid_until_minutes: int | None = None
    capacity: dict[str, Any] | None = None
    """The type's capacity ladder (provider.capacity), rungs TPU_MARKETS only; None: one
    request as the body asks."""
    credentials: pulumi.Input[str] | None = None
    """Service-account JSON (or an OAuth token); kept secret in the state. None: ADC."""
    api_endpoint: str | None = None
    """host:port of an emulator or the test fake, spoken to over plain http."""


class QueuedTpuSlice(Resource, module=MODULE, name="QueuedTpuSlice"):
    """A TPU slice that exists (ACTIVE) once GCP has filled its queued request."""

    queued_state: pulumi.Output[str]
    status: pulumi.Output[str]
    internal_ip: pulumi.Output[str | None]
    external_ip: pulumi.Output[str | None]

    def __init__(
        self, name: str, args: QueuedTpuSliceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        props: dict[str, Any] = {key: None for key in OUTPUT_KEYS}
        props.update(
            {
                "project": args.project,
                "zone": args.zone,
                "name": args.name,
                "body": args.body,
                "wait_minutes": args.wait_minutes,
                "valid_until_minutes": args.valid_until_minutes,
                "capacity": args.capacity,
                "credentials": (
                    pulumi.Output.secret(args.credentials) if args.credentials is not None else None
                ),
                "api_endpoint": args.api_endpoint,
            }
        )
        secret_state = pulumi.ResourceOptions(additional_secret_outputs=["credentials"])
        super().__init__(
            QueuedSliceProvider(), name, props,
            pulumi.ResourceOptions.merge(legacy_aliases(opts), secret_state),
        )
