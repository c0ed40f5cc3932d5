"""`invoke preflight`'s reservation lines: what each reservation a capacity ladder names still
has free, read from the live API, and which pinned node each rung is then meant for (the plan's
ladder table, ops/review/plan_capacity.py, with the counts filled in). A reservation shared from
another project is its owner's to read and stays unread; one that cannot be read is a finding."""

from __future__ import annotations

from collections.abc import Mapping

from infra.workers.nodes import WorkerGroupError
from infra.workers.reservations import ReservationReader
from model.config import ClusterConfig
from ops.lifecycle.apis import QuotaApis
from ops.review.plan_capacity import Free, ladder_lines, ladder_rows


def read_free(config: ClusterConfig, apis: QuotaApis) -> tuple[Free, list[str]]:
    """(zone, reservation) -> free, for the project's own reservations the ladders name; and
    the problems met (a reservation missing or unreadable, named with the fix)."""
    reader = ReservationReader(config.provider.project, apis.clients, apis.retry)
    free: dict[tuple[str, str], int] = {}
    problems = []
    for policy in (config.provider.capacity or {}).values():
        for rung in policy.ladder or []:
            zone = (rung.zones or [config.provider.availability_zone])[0]
            for reference in rung.reservations or []:
                if reference.startswith("projects/") or (zone, reference) in free:
                    continue
                try:
                    free[(zone, reference)] = reader.read(zone, reference).free
                except WorkerGroupError as missing:
                    problems.append(str(missing))
    return free, problems


def reservation_lines(config: ClusterConfig, counts: Mapping[str, int],
                      apis: QuotaApis) -> list[str]:
    """The ladders with what each reservation has free, then each problem on its own line."""
    if not any(p.is_ladder for p in (config.provider.capacity or {}).values()):
        return []
    free, problems = read_free(config, apis)
    return ladder_lines(ladder_rows(config, counts, free)) + [
        f"reservation problem: {problem}" for problem in problems]
