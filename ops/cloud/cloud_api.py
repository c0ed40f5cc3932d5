"""The Compute (or TPU) API for day-two tasks, as the stack's one identity.

Every task that calls a Google API (`kill-random-node --hard`, `down --workers-only`, `status`'s
preemptions and stopped head, the host-key lookup) calls it as the program and the providers
do: with the cluster YAML's `provider.gcp_credentials` (service-account JSON or an OAuth token)
when it has them, else Application Default Credentials (ops.stacks.stack.stack_credentials, then
infra.workers.clients.build_credentials, the one place credentials are built).
`RAY_GCP_API_ENDPOINT` (host:port) points it at an emulator or the tests' fake, over plain http.
A task that asks several questions (`status`) asks them all through one `StackApi`: one set of
clients, the head instance read once. The clients themselves (`api_clients`) and the errors'
one line (`api_errors`) are ops.stacks.cloud_nodes', where the fan-out to every node finds them
too.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from infra.workers.compute_rest import rest_url
from ops.errors import OpsError
from ops.stacks.cloud_nodes import API_ENDPOINT_ENV, api_clients

if TYPE_CHECKING:
    from google.auth.transport.requests import AuthorizedSession

    from infra.workers.clients import ApiClients
    from infra.workers.nodes import NodeApi
    from model.config import ClusterConfig
    from ops.stacks.stack import StackOutputs

__all__ = ["StackApi", "nodes_api", "rest_session", "rest_url"]


class StackApi:
    """One task's way to the stack's cloud: its clients, built on first use, and its head
    instance, read from the Compute API at most once (what it answered, or how it failed)."""

    def __init__(self, outputs: StackOutputs, endpoint: str | None = None) -> None:
        self.outputs = outputs
        self._endpoint = endpoint
        self._clients: ApiClients | None = None
        self._head: dict[str, Any] | None = None
        self._head_error: Exception | None = None

    @property
    def clients(self) -> ApiClients:
        if self._clients is None:
            self._clients = api_clients(self.outputs, self._endpoint)
        return self._clients

    def head(self) -> dict[str, Any]:
        """The head instance (the API's JSON); the API's or google-auth's error, when that
        was the answer, raised again on every ask."""
        from google.api_core.exceptions import GoogleAPIError
        from google.auth.exceptions import GoogleAuthError
        from requests import RequestException

        from infra.workers.retry import with_retry

        if self._head is not None:
            return self._head
        if self._head_error is None:
            outputs = self.outputs
            try:
                self._head = with_retry(lambda: self.clients.compute.call(
                    "instances.get", project=outputs.project, zone=outputs.zone,
                    instance=outputs.head_name))
                return self._head
            except (GoogleAPIError, GoogleAuthError, RequestException) as exc:
                self._head_error = exc
        raise self._head_error


def rest_session(config: ClusterConfig) -> tuple[AuthorizedSession, str | None]:
    """Google's REST APIs as the cluster's identity (its YAML's `provider.gcp_credentials`,
    else ADC): an AuthorizedSession, and the emulator RAY_GCP_API_ENDPOINT names (None:
    Google's own hosts; `rest_url`, infra.workers.compute_rest's, builds the URL either way)."""
    from infra.workers.clients import build_credentials
    from infra.workers.compute_rest import authorized_session

    endpoint = os.environ.get(API_ENDPOINT_ENV) or None
    secret = config.provider.gcp_credentials
    credentials = build_credentials(
        secret.credentials.get_secret_value() if secret else None, endpoint)
    return authorized_session(credentials), endpoint


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
