"""Host keys GCE publishes for an instance, to check the key a node offers on first contact.

The guest agent on GCE images writes the instance's SSH host keys to guest attributes under
`hostkeys/` (the program turns guest attributes on for every node), and the Compute API
returns them to anyone who may view the instance (`instances.getGuestAttributes`). A key that
matches one of them is the instance's own, not a man in the middle's.

They are not always there: TPU VMs are not Compute instances, the agent may not have written
them yet, or no credentials are at hand. Then `PublishedKeys.keys` is empty and `reason` says
why, and the caller falls back to pinning on first use.

`RAY_GCP_COMPUTE_ENDPOINT=host:port` points the lookup at an emulator or the test fake (plain
http, anonymous); otherwise it asks compute.googleapis.com with Application Default Credentials.
The Google libraries are slower to import than a whole SSH round trip, so they are imported
only on a first contact and only when such credentials can exist (the key file, gcloud's ADC
file, or a GCE machine).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

COMPUTE_ENDPOINT_ENV = "RAY_GCP_COMPUTE_ENDPOINT"
COMPUTE_READONLY = "https://www.googleapis.com/auth/compute.readonly"
HOSTKEYS_PATH = "hostkeys/"
LOOKUP_TIMEOUT = 15.0


@dataclass(frozen=True)
class PublishedKeys:
    """Base64 blobs of the instance's published host keys; `reason` when there are none."""

    keys: frozenset[str]
    reason: str = ""


def published_host_keys(project: str, zone: str, instance: str) -> PublishedKeys:
    """The keys GCE publishes for `instance`; empty with a reason when none can be had."""
    if not (project and zone and instance):
        return PublishedKeys(frozenset(), "the stack outputs name no project, zone or instance")
    if not (os.environ.get(COMPUTE_ENDPOINT_ENV) or _credentials_may_exist()):
        return PublishedKeys(frozenset(), "no Application Default Credentials to ask the "
                                          "Compute API with (`gcloud auth application-default "
                                          "login`)")
    from google.api_core import exceptions as api_errors
    from google.auth import exceptions as auth_errors

    try:
        client = _instances_client()
        from google.cloud import compute_v1

        answer = client.get_guest_attributes(
            request=compute_v1.GetGuestAttributesInstanceRequest(
                project=project, zone=zone, instance=instance, query_path=HOSTKEYS_PATH
            ),
            timeout=LOOKUP_TIMEOUT,
        )
    except api_errors.NotFound:
        return PublishedKeys(frozenset(), "none published yet (or not a Compute instance)")
    except (api_errors.GoogleAPIError, auth_errors.GoogleAuthError, OSError) as exc:
        return PublishedKeys(frozenset(), f"could not ask the Compute API: {_first_line(exc)}")
    # Like gcloud's `compute ssh`: the value is the key's base64, cut at any whitespace.
    keys = frozenset(
        item.value.split()[0]
        for item in answer.query_value.items
        if item.namespace == HOSTKEYS_PATH.rstrip("/") and item.value.strip()
    )
    return PublishedKeys(keys, "" if keys else "none published yet")


def _credentials_may_exist() -> bool:
    """Where google.auth.default() finds credentials, checked without importing it."""
    if os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"):
        return True
    gcloud = os.environ.get("CLOUDSDK_CONFIG") or (
        Path(os.environ.get("APPDATA", ""), "gcloud") if os.name == "nt"
        else Path.home() / ".config" / "gcloud"
    )
    if Path(gcloud, "application_default_credentials.json").is_file():
        return True
    try:  # a GCE machine has its service account's credentials on the metadata server
        return "Google" in Path("/sys/class/dmi/id/product_name").read_text()
    except OSError:
        return False


def _instances_client():
    """The Compute client: the endpoint from the environment (anonymous, http), else ADC.
    Credentials are looked up before the client library is imported: it is slow to import."""
    endpoint = os.environ.get(COMPUTE_ENDPOINT_ENV)
    if endpoint:
        from google.auth.credentials import AnonymousCredentials

        credentials, transport = AnonymousCredentials(), {"host": endpoint, "url_scheme": "http"}
    else:
        import google.auth

        credentials, _ = google.auth.default(scopes=[COMPUTE_READONLY])
        transport = {}
    from google.cloud.compute_v1 import InstancesClient
    from google.cloud.compute_v1.services.instances.transports import InstancesRestTransport

    return InstancesClient(
        transport=InstancesRestTransport(credentials=credentials, **transport)
    )


def _first_line(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
