"""The Compute (or TPU) API for day-two tasks that act on instances themselves
(`kill-random-node --hard`, `down --workers-only`), through the WorkerGroup's own node API and
Application Default Credentials. `RAY_GCP_API_ENDPOINT` (host:port) points it at an emulator
or the tests' fake, over plain http.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ops.errors import OpsError

if TYPE_CHECKING:
    from infra.workers.nodes import NodeApi

API_ENDPOINT_ENV = "RAY_GCP_API_ENDPOINT"


def nodes_api(project: str, zone: str, kind: str = "compute") -> NodeApi:
    from infra.workers.apis import Deadlines, node_api
    from infra.workers.retry import RetryPolicy

    if not (project and zone):
        raise OpsError("the stack's outputs have no project or zone: run `invoke up` again")
    props = {"project": project, "zone": zone,
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
        raise OpsError(f"{what}: no Google Cloud credentials: run `gcloud auth "
                       f"application-default login` ({exc})") from None
    except (GoogleAPICallError, WorkerGroupError) as exc:
        raise OpsError(f"{what} failed: {exc}") from None
