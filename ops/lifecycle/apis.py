"""How the lifecycle's read-only checks reach the Google APIs (the quota pre-flight, the
network check): the cluster's own credentials, the clients, an emulator endpoint when one is
set, and the retry policy (by default `INTERACTIVE`: the user waits on these reads, so a server
fault or an unreachable endpoint is said within seconds; a rate quota is still waited out)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from infra.workers.clients import ApiClients, build_credentials
from infra.workers.retry import INTERACTIVE, RetryPolicy
from model.config import ClusterConfig
from ops.cloud.cloud_api import API_ENDPOINT_ENV


@dataclass(frozen=True)
class QuotaApis:
    """How this check reaches the APIs: credentials, clients, endpoint, retry policy."""

    credentials: Any
    clients: ApiClients
    endpoint: str | None
    retry: RetryPolicy


def quota_apis(
    config: ClusterConfig, api_endpoint: str | None, retry: RetryPolicy | None
) -> QuotaApis:
    if api_endpoint is None:  # an emulator or the tests' fake, as for the other day-two tasks
        api_endpoint = os.environ.get(API_ENDPOINT_ENV) or None
    secret = config.provider.gcp_credentials
    credentials = build_credentials(
        secret.credentials.get_secret_value() if secret else None, api_endpoint
    )
    return QuotaApis(credentials, ApiClients(credentials, api_endpoint), api_endpoint,
                 retry or INTERACTIVE)
