"""The Compute (or TPU) API for day-two tasks, as the stack's one identity.

Every task that calls a Google API (`kill-random-node --hard`, `down --workers-only`, `status`'s
preemptions and stopped head, the host-key lookup) calls it as the program and the providers
do: with the cluster YAML's `provider.gcp_credentials` (service-account JSON or an OAuth token)
when it has them, else Application Default Credentials (ops.stack.stack_credentials, then
infra.workers.clients.build_credentials, the one place credentials are built).
`RAY_GCP_API_ENDPOINT` (host:port) points it at an emulator or the tests' fake, over plain http.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ops.errors import OpsError

if TYPE_CHECKING:
    from infra.workers.clients import ApiClients
    from infra.workers.nodes import NodeApi
    from ops.stack import StackOutputs

API_ENDPOINT_ENV = "RAY_GCP_API_ENDPOINT"


def api_clients(outputs: StackOutputs, endpoint: str | None = None) -> ApiClients:
    """Clients for the stack's identity; `endpoint` (else RAY_GCP_API_ENDPOINT) an emulator."""
    from infra.workers.clients import ApiClients, build_credentials
    from ops.stack import stack_credentials

    endpoint = endpoint if endpoint is not None else os.environ.get(API_ENDPOINT_ENV) or None
    return ApiClients(build_credentials(stack_credentials(outputs), endpoint), endpoint)


def nodes_api(
    project: str, zone: str, kind: str = "compute", credentials: str | None = None
) -> NodeApi:
    """The node API of `kind` in `zone`, as `credentials` (stack_credentials; None: ADC)."""
    from infra.workers.apis import Deadlines, node_api
    from infra.workers.retry import RetryPolicy

    if not (project and zone):
        raise OpsError("the stack's outputs have no project or zone: run `invoke up` again")
    props = {"project": project, "zone": zone, "credentials": credentials,
             "api_endpoint": os.environ.get(API_ENDPOINT_ENV) or None}
    return node_api("tpu" if kind == "tpu" else "compute", props, RetryPolicy(), Deadlines())


@contextlib.contextmanager
def api_errors(what: str) -> Iterator[None]:
    """The API's and google-auth's exceptions as one line naming `what` failed."""
    from google.api_core.exceptions import GoogleAPICallError
    from google.auth.exceptions import GoogleAuthError

    from infra.workers.nodes import WorkerGroupError

    try:
        yield
    except GoogleAuthError as exc:
        raise OpsError(f"{what}: no usable Google Cloud credentials: set "
                       "provider.gcp_credentials in the cluster YAML or run `gcloud auth "
                       f"application-default login` ({exc})") from None
    except (GoogleAPICallError, WorkerGroupError) as exc:
        raise OpsError(f"{what} failed: {exc}") from None
