"""The workers Ray's autoscaler launched, as rows of `invoke status`'s nodes table: listed by
ops.stacks.cloud_nodes (the fan-out to every node lists them too), each with the market it got;
an API that does not answer leaves them out in one line."""

from __future__ import annotations

from ops.cloud.cloud_api import StackApi
from ops.errors import OpsError
from ops.stacks.cloud_nodes import LISTING, api_errors, autoscaled_nodes
from ops.stacks.stack import Node


def autoscaled_rows(api: StackApi) -> tuple[list[Node], list[str]]:
    """The autoscaler's workers for the nodes table, or none and the one line `api_errors`
    words for why the API could not be asked."""
    if not (api.outputs.project and api.outputs.zone):
        return [], []
    try:
        with api_errors(LISTING):
            return autoscaled_nodes(api.outputs, api.clients), []
    except OpsError as exc:
        return [], [str(exc)]
