"""The stack's nodes the outputs do not list: the workers Ray's autoscaler launched, as the
Compute API lists them, for `invoke status` (ops.cloud) and the fan-out to every node
(ops.remote), and the API clients they are asked with, as the stack's one identity.

The stack's outputs know the head and the nodes Pulumi keeps; the autoscaler's own workers
(Ray's kind `ray-node-kind: worker`) are asked of the API in every zone (one aggregated list
filtered by the cluster's labels, as Ray's own `non_terminated_nodes` asks by its tags): the
head's provider creates them in `availability_zone` and in any zone a capacity ladder's rung
names. Each comes with the market it got, by its own scheduling: a spot type's worker that the
head's provider created on-demand (provider.capacity) is on-demand. Here below both rooms, as
ops.cloud reaches nodes through ops.remote: neither may import the other's way back.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ops.errors import OpsError, missing_role
from ops.stacks.stack import Node, StackOutputs, stack_credentials

if TYPE_CHECKING:
    from infra.workers.clients import ApiClients

API_ENDPOINT_ENV = "RAY_GCP_API_ENDPOINT"
AUTOSCALED_KIND = "autoscaled"  # the KIND column's word for them
LISTING = "listing the autoscaler's workers"  # what failed, when the API did not answer


def api_clients(outputs: StackOutputs, endpoint: str | None = None) -> ApiClients:
    """Clients for the stack's identity; `endpoint` (else RAY_GCP_API_ENDPOINT) an emulator."""
    from infra.workers.clients import ApiClients, build_credentials

    endpoint = endpoint if endpoint is not None else os.environ.get(API_ENDPOINT_ENV) or None
    return ApiClients(build_credentials(stack_credentials(outputs), endpoint), endpoint)


def autoscaled_nodes(outputs: StackOutputs, clients: ApiClients) -> list[Node]:
    """The cluster's autoscaler-launched instances in every zone, whatever their status, by
    name: one aggregated list, page by page, retried as a task's reads are."""
    from infra.workers.compute_api import (
        addresses,
        aggregated_instances,
        instance_market,
        label_filter,
    )
    from infra.workers.retry import INTERACTIVE
    from model.labels import CLUSTER_NAME, KIND_WORKER, NODE_KIND, USER_NODE_TYPE

    wanted = label_filter({CLUSTER_NAME: outputs.cluster_name, NODE_KIND: KIND_WORKER})
    nodes = []
    for zone, instance in aggregated_instances(clients, outputs.project, wanted, INTERACTIVE):
        internal_ip, external_ip = addresses(instance)
        nodes.append(Node(
            name=instance["name"], node_type=(instance.get("labels") or {}).get(USER_NODE_TYPE, ""),
            kind=AUTOSCALED_KIND, internal_ip=internal_ip or "", external_ip=external_ip,
            status=instance.get("status", ""), zone=zone, market=instance_market(instance)))
    return sorted(nodes, key=lambda node: node.name)


@contextlib.contextmanager
def api_errors(what: str) -> Iterator[None]:
    """The API's, google-auth's and the HTTP transport's exceptions as one line naming `what`
    failed."""
    from google.api_core.exceptions import GoogleAPIError
    from google.auth.exceptions import GoogleAuthError
    from requests import RequestException

    from infra.workers.nodes import WorkerGroupError

    try:
        yield
    except GoogleAuthError as exc:
        raise OpsError(f"{what}: no usable Google Cloud credentials: set "
                       "provider.gcp_credentials in the cluster YAML or run `gcloud auth "
                       f"application-default login` ({exc})") from None
    except (GoogleAPIError, WorkerGroupError) as exc:
        raise OpsError(f"{what} failed: {exc}{missing_role(str(exc))}") from None
    except RequestException as exc:  # no HTTP answer at all: refused, reset, timed out
        raise OpsError(f"{what} failed: the API did not answer ({exc})") from None
