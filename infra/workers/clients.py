"""Credentials and API clients, built inside the provider process from the resource's inputs.

Credentials arrive as a (secret) input on every call, never inside the serialized provider.
An `api_endpoint` means an emulator or the test fake: plain http and, unless credentials are
given, the key file GOOGLE_APPLICATION_CREDENTIALS names, else anonymous (the convention
Google's own emulators follow).

The google-cloud client libraries are imported where a client is built, not at module load:
the program imports `infra.workers` for its resource classes on every preview, and
`google.cloud.compute_v1` alone costs over a second to import.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from google.auth.credentials import Credentials
    from google.cloud import compute_v1, tpu_v2

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
        return self._cached("instances", self._build_instances)

    @property
    def zone_operations(self) -> compute_v1.ZoneOperationsClient:
        return self._cached("zone_operations", self._build_zone_operations)

    @property
    def tpu(self) -> tpu_v2.TpuClient:
        return self._cached("tpu", self._build_tpu)

    def _build_instances(self) -> compute_v1.InstancesClient:
        from google.cloud.compute_v1 import InstancesClient
        from google.cloud.compute_v1.services.instances.transports import InstancesRestTransport

        args = self._transport_args("compute.googleapis.com")
        return InstancesClient(transport=InstancesRestTransport(**args))

    def _build_zone_operations(self) -> compute_v1.ZoneOperationsClient:
        from google.cloud.compute_v1 import ZoneOperationsClient
        from google.cloud.compute_v1.services.zone_operations.transports import (
            ZoneOperationsRestTransport,
        )

        args = self._transport_args("compute.googleapis.com")
        return ZoneOperationsClient(transport=ZoneOperationsRestTransport(**args))

    # What zone failover and the quota pre-flight read (infra/workers/zones.py, quota.py).

    @property
    def zones(self) -> compute_v1.ZonesClient:
        return self._cached("zones", lambda: self._compute("zones", "Zones"))

    @property
    def machine_types(self) -> compute_v1.MachineTypesClient:
        return self._cached("machine_types", lambda: self._compute("machine_types", "MachineTypes"))

    @property
    def accelerator_types(self) -> compute_v1.AcceleratorTypesClient:
        return self._cached(
            "accelerator_types", lambda: self._compute("accelerator_types", "AcceleratorTypes")
        )

    @property
    def regions(self) -> compute_v1.RegionsClient:
        return self._cached("regions", lambda: self._compute("regions", "Regions"))

    @property
    def subnetworks(self) -> compute_v1.SubnetworksClient:
        return self._cached("subnetworks", lambda: self._compute("subnetworks", "Subnetworks"))

    @property
    def reservations(self) -> compute_v1.ReservationsClient:
        """What a capacity ladder's reservation rungs read (infra/workers/reservations.py)."""
        return self._cached("reservations",
                            lambda: self._compute("reservations", "Reservations"))

    @property
    def firewalls(self) -> compute_v1.FirewallsClient:
        return self._cached("firewalls", lambda: self._compute("firewalls", "Firewalls"))

    def _compute(self, service: str, name: str) -> Any:
        """`compute_v1.<name>Client` over its REST transport, e.g. ("zones", "Zones")."""
        from google.cloud import compute_v1

        transports = importlib.import_module(
            f"google.cloud.compute_v1.services.{service}.transports"
        )
        transport = getattr(transports, f"{name}RestTransport")
        args = self._transport_args("compute.googleapis.com")
        return getattr(compute_v1, f"{name}Client")(transport=transport(**args))

    def _build_tpu(self) -> tpu_v2.TpuClient:
        from google.cloud.tpu_v2 import TpuClient
        from google.cloud.tpu_v2.services.tpu.transports import TpuRestTransport

        return TpuClient(transport=TpuRestTransport(**self._transport_args("tpu.googleapis.com")))
