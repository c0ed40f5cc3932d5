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
from typing import TYPE_CHECKING

from ops.errors import OpsError
from ops.stacks.cloud_nodes import API_ENDPOINT_ENV, api_clients

if TYPE_CHECKING:
    from google.auth.transport.requests import AuthorizedSession
    from google.cloud import compute_v1

    from infra.workers.clients import ApiClients
    from infra.workers.nodes import NodeApi
    from model.config import ClusterConfig
    from ops.stacks.stack import StackOutputs


class StackApi:
    """One task's way to the stack's cloud: its clients, built on first use, and its head
    instance, read from the Compute API at most once (what it answered, or how it failed)."""

    def __init__(self, outputs: StackOutputs, endpoint: str | None = None) -> None:
        self.outputs = outputs
        self._endpoint = endpoint
        self._clients: ApiClients | None = None
        self._head: compute_v1.Instance | None = None
        self._head_error: Exception | None = None

    @property
    def clients(self) -> ApiClients:
        if self._clients is None:
            self._clients = api_clients(self.outputs, self._endpoint)
        return self._clients

    def head(self) -> compute_v1.Instance:
        """The head instance; the API's or google-auth's error, when that was the answer,
        raised again on every ask."""
        from google.api_core.exceptions import GoogleAPIError
        from google.auth.exceptions import GoogleAuthError
        from requests import RequestException

        from infra.workers.retry import with_retry

        if self._head is not None:
            return self._head
        if self._head_error is None:
            outputs = self.outputs
            try:
                self._head = with_retry(lambda: self.clients.instances.get(
                    project=outputs.project, zone=outputs.zone, instance=outputs.head_name,
                    retry=None))
                return self._head
            except (GoogleAPIError, GoogleAuthError, RequestException) as exc:
                self._head_error = exc
        raise self._head_error


def rest_session(config: ClusterConfig) -> tuple[AuthorizedSession, str | None]:
    """Google's REST APIs as the cluster's identity (its YAML's `provider.gcp_credentials`,
    else ADC): an AuthorizedSession, and the emulator RAY_GCP_API_ENDPOINT names (None:
    Google's own hosts; `rest_url` builds the URL either way)."""
    import google.auth
    from google.auth.transport.requests import AuthorizedSession

    from infra.workers.clients import CLOUD_PLATFORM, build_credentials

    endpoint = os.environ.get(API_ENDPOINT_ENV) or None
    secret = config.provider.gcp_credentials
    credentials = build_credentials(
        secret.credentials.get_secret_value() if secret else None, endpoint)
    if credentials is None:
        credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM])
    return AuthorizedSession(credentials), endpoint


def rest_url(endpoint: str | None, base: str, path: str) -> str:
    """`base/path` (base an API's https://*.googleapis.com/... root), at `endpoint` over plain
    http when there is one."""
    if endpoint:
        base = f"http://{endpoint}" + base.split(".googleapis.com", 1)[1]
    return f"{base}/{path}"


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
