"""`invoke preflight`'s reservation lines: what each reservation a capacity ladder names still
has free, read from the live API, and which pinned node each rung is then meant for (the plan's
ladder table, ops/review/plan_capacity.py, with the counts filled in). A reservation shared from
another project is its owner's to read and stays unread; one that cannot be read is a finding.

An `any-reservation` rung names none: what it can take is the free room of the project's
reservations in its zone that do not require a specific affinity and have the node type's
shape (machine type and GPUs; a TPU type's accelerator type), as GCE's ANY_RESERVATION and a
reserved TPU node pick one. None such is a finding too: the rung would place nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.workers.nodes import WorkerGroupError
from infra.workers.reservations import ReservationReader, body_shape
from model.config import ClusterConfig
from model.config.node_config import ComputeNodeConfig
from ops.lifecycle.apis import QuotaApis
from ops.review.plan_capacity import Free, any_key, ladder_lines, ladder_rows


def read_free(config: ClusterConfig, apis: QuotaApis) -> tuple[Free, list[str]]:
    """(zone, reservation) -> free, for the project's own reservations the ladders name, and
    (zone, any_key(type)) -> free for each any-reservation rung; and the problems met (a
    reservation missing or unreadable, or no reservation an any-reservation rung can use,
    named with the fix)."""
    reader = ReservationReader(config.provider.project, apis.clients, apis.retry)
    free: dict[tuple[str, str], int] = {}
    problems = []
    for node_type, policy in sorted((config.provider.capacity or {}).items()):
        for rung in policy.ladder or []:
            zone = (rung.zones or [config.provider.availability_zone])[0]
            if rung.market == "any-reservation" and (zone, any_key(node_type)) not in free:
                shape = _shape(config, node_type)
                held = free[(zone, any_key(node_type))] = reader.any_free(zone, shape)
                if not held:
                    problems.append(
                        f"{node_type}'s any-reservation rung in {zone}: no reservation of "
                        f"project {config.provider.project} there has room for "
                        f"{_describe(shape)} without naming it (specificReservationRequired "
                        "false): name the reservation in a `reservation` rung, or check "
                        f"`gcloud compute reservations list --project "
                        f"{config.provider.project}`")
            for reference in rung.reservations or []:
                if reference.startswith("projects/") or (zone, reference) in free:
                    continue
                try:
                    free[(zone, reference)] = reader.read(zone, reference).free
                except WorkerGroupError as missing:
                    problems.append(str(missing))
    return free, problems


def _shape(config: ClusterConfig, node_type: str) -> dict[str, Any]:
    """The node type's body as a reservation's shape reads it: a TPU type's accelerator type
    stands for its machine type."""
    node_config = config.available_node_types[node_type].node_config
    if isinstance(node_config, ComputeNodeConfig):
        return node_config.body()
    accelerator = node_config.accelerator_type or (
        node_config.accelerator_config.type if node_config.accelerator_config else "")
    return {"machineType": str(accelerator)}


def _describe(shape: Mapping[str, Any]) -> str:
    machine, gpus = body_shape(shape)
    return machine + (f" with {', '.join(f'{n} x {gpu}' for gpu, n in gpus)}" if gpus else "")


def reservation_lines(config: ClusterConfig, counts: Mapping[str, int],
                      apis: QuotaApis) -> list[str]:
    """The ladders with what each reservation has free, then each problem on its own line."""
    if not any(p.is_ladder for p in (config.provider.capacity or {}).values()):
        return []
    free, problems = read_free(config, apis)
    return ladder_lines(ladder_rows(config, counts, free)) + [
        f"reservation problem: {problem}" for problem in problems]
