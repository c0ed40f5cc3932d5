"""Credentials and API clients, built inside the provider process from the resource's inputs.

Credentials arrive as a (secret) input on every call, never inside the serialized provider.
An `api_endpoint` means an emulator or the test fake: plain http and, unless credentials are
given, the key file GOOGLE_APPLICATION_CREDENTIALS names, else anonymous (the convention
Google's own emulators follow).

Compute is called over REST (compute_rest.py); the TPU client library is imported where its
client is built, not at module load: the program imports `infra.workers` for its resource
classes on every preview.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING

from infra.workers.compute_rest import CLOUD_PLATFORM, ComputeRest

if TYPE_CHECKING:
    from google.auth.credentials import Credentials
    from google.cloud import tpu_v2

__all__ = ["CLOUD_PLATFORM", "ApiClients", "build_credentials"]


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
    if api_endpoint:
        return _emulator_credentials()
    return None


def _emulator_credentials() -> Credentials:
    """At an emulator: the key file GOOGLE_APPLICATION_CREDENTIALS names, as ADC would
    use it (an emulator that checks identities needs one), else anonymous."""
    import os

    path = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if path:
        import google.auth

        return google.auth.default(scopes=[CLOUD_PLATFORM])[0]
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


class ApiClients:
    """Compute over REST (compute_rest.py: one HTTP session per thread inside) and one TPU
    client per thread: the TPU REST transport's HTTP session is not shared."""

    def __init__(self, credentials: Credentials | None, api_endpoint: str | None) -> None:
        self._credentials = credentials
        self._endpoint = api_endpoint
        self._local = threading.local()
        self._compute: ComputeRest | None = None

    @property
    def compute(self) -> ComputeRest:
        """Every Compute call: instances, operations, zones, machine and accelerator types,
        regions' quotas, subnetworks, reservations, firewalls."""
        if self._compute is None:
            self._compute = ComputeRest(self._credentials, self._endpoint)
        return self._compute

    @property
    def tpu(self) -> tpu_v2.TpuClient:
        client = getattr(self._local, "tpu", None)
        if client is None:
            client = self._local.tpu = self._build_tpu()
        return client

    def _build_tpu(self) -> tpu_v2.TpuClient:
        from google.cloud.tpu_v2 import TpuClient
        from google.cloud.tpu_v2.services.tpu.transports import TpuRestTransport

        if self._endpoint:
            args = {"host": self._endpoint, "url_scheme": "http"}
        else:
            args = {"host": "tpu.googleapis.com"}
        return TpuClient(transport=TpuRestTransport(credentials=self._credentials, **args))
