"""Credentials and API clients, built inside the provider process from the resource's inputs.

Credentials arrive as a (secret) input on every call, never inside the serialized provider.
An `api_endpoint` means an emulator or the test fake: plain http and, unless credentials are
given, anonymous — the convention Google's own emulators follow.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from google.auth.credentials import AnonymousCredentials, Credentials
from google.cloud import compute_v1, tpu_v2
from google.cloud.compute_v1.services.instances.transports import InstancesRestTransport
from google.cloud.compute_v1.services.zone_operations.transports import (
    ZoneOperationsRestTransport,
)
from google.cloud.tpu_v2.services.tpu.transports import TpuRestTransport

CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
C = TypeVar("C")


def build_credentials(secret: str | None, api_endpoint: str | None) -> Credentials | None:
    """Service-account JSON or an OAuth token; None means Application Default Credentials."""
    if secret:
        try:
            info = json.loads(secret)
        except json.JSONDecodeError:
            info = None
        if isinstance(info, dict):
            from google.oauth2 import service_account

            return service_account.Credentials.from_service_account_info(
                info, scopes=[CLOUD_PLATFORM]
            )
        from google.oauth2.credentials import Credentials as TokenCredentials

        return TokenCredentials(token=secret.strip())
    return AnonymousCredentials() if api_endpoint else None


class ApiClients:
    """One set of clients per thread: the REST transports' HTTP sessions are not shared."""

    def __init__(self, credentials: Credentials | None, api_endpoint: str | None) -> None:
        self._credentials = credentials
        self._endpoint = api_endpoint
        self._local = threading.local()

    def _transport_args(self, default_host: str) -> dict[str, Any]:
        if self._endpoint:
            return {"host": self._endpoint, "url_scheme": "http", "credentials": self._credentials}
        return {"host": default_host, "credentials": self._credentials}

    def _cached(self, key: str, build: Callable[[], C]) -> C:
        client = getattr(self._local, key, None)
        if client is None:
            client = build()
            setattr(self._local, key, client)
        return client

    @property
    def instances(self) -> compute_v1.InstancesClient:
        return self._cached(
            "instances",
            lambda: compute_v1.InstancesClient(
                transport=InstancesRestTransport(**self._transport_args("compute.googleapis.com"))
            ),
        )

    @property
    def zone_operations(self) -> compute_v1.ZoneOperationsClient:
        return self._cached(
            "zone_operations",
            lambda: compute_v1.ZoneOperationsClient(
                transport=ZoneOperationsRestTransport(
                    **self._transport_args("compute.googleapis.com")
                )
            ),
        )

    @property
    def tpu(self) -> tpu_v2.TpuClient:
        return self._cached(
            "tpu",
            lambda: tpu_v2.TpuClient(
                transport=TpuRestTransport(**self._transport_args("tpu.googleapis.com"))
            ),
        )
