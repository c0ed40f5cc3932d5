"""Host keys GCE publishes for an instance, to check the key a node offers on first contact.

The guest agent on GCE images writes the instance's SSH host keys to guest attributes under
`hostkeys/` (the program turns guest attributes on for every node), and the Compute API
returns them to anyone who may view the instance (`instances.getGuestAttributes`). A key that
matches one of them is the instance's own, not a man in the middle's.

A TPU VM is not a Compute instance: its keys are the TPU API's guest attributes of the node
(`nodes.getGuestAttributes` with `queryPath` and `workerIds`, per the TPU v2 discovery
document), asked for host 0, the one SSH reaches. Each node is looked up in its own zone.

They are not always there: the agent may not have written them yet, or no credentials are at
hand. Then `PublishedKeys.keys` is empty and `reason` says why, and the caller refuses unless
the user accepts the key once (ops/remote/ssh.py).

The lookup runs as the stack's identity (`credentials`, ops.stacks.stack.stack_credentials; None:
Application Default Credentials). `RAY_GCP_COMPUTE_ENDPOINT=host:port` points it at an
emulator or the test fake (plain http). The Google libraries are slower to import than a
whole SSH round trip, so they are imported only on a first contact and only when credentials
can exist (the stack's own, the ADC key file, gcloud's ADC file, or a GCE machine).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

COMPUTE_ENDPOINT_ENV = "RAY_GCP_COMPUTE_ENDPOINT"
HOSTKEYS_PATH = "hostkeys/"
LOOKUP_TIMEOUT = 15.0


@dataclass(frozen=True)
class PublishedKeys:
    """Base64 blobs of the instance's published host keys; `reason` when there are none."""

    keys: frozenset[str]
    reason: str = ""


def published_host_keys(
    project: str, zone: str, instance: str, api: str = "compute", credentials: str | None = None
) -> PublishedKeys:
    """The keys GCE publishes for `instance` (a TPU node when `api` is "tpu") in its `zone`,
    asked as `credentials`; empty with a reason when none can be had."""
    if not (project and zone and instance):
        return PublishedKeys(frozenset(), "the stack outputs name no project, zone or instance")
    endpoint = os.environ.get(COMPUTE_ENDPOINT_ENV) or None
    if not (endpoint or credentials or credentials_may_exist()):
        return PublishedKeys(frozenset(), "no credentials to ask the API with (set "
                                          "provider.gcp_credentials or run `gcloud auth "
                                          "application-default login`)")
    from google.api_core import exceptions as api_errors
    from google.auth import exceptions as auth_errors

    from infra.workers.clients import ApiClients, build_credentials

    clients = ApiClients(build_credentials(credentials, endpoint), endpoint)
    what = "TPU" if api == "tpu" else "Compute"
    try:
        items = (_tpu_items if api == "tpu" else _compute_items)(clients, project, zone, instance)
    except api_errors.NotFound:
        return PublishedKeys(frozenset(), f"none published yet in {zone} (the {what} API "
                                          "knows no such node or attributes)")
    except (api_errors.GoogleAPIError, auth_errors.GoogleAuthError, OSError) as exc:
        return PublishedKeys(frozenset(), f"could not ask the {what} API: {_first_line(exc)}")
    # Like gcloud's `compute ssh`: the value is the key's base64, cut at any whitespace.
    keys = frozenset(
        value.split()[0]
        for namespace, value in items
        if namespace == HOSTKEYS_PATH.rstrip("/") and value.strip()
    )
    return PublishedKeys(keys, "" if keys else "none published yet")


def _compute_items(clients, project: str, zone: str, instance: str) -> list[tuple[str, str]]:
    """(namespace, value) of each entry (instances.getGuestAttributes' JSON)."""
    items = clients.compute.guest_attributes(project, zone, instance, HOSTKEYS_PATH,
                                             timeout=LOOKUP_TIMEOUT)
    return [(item.get("namespace", ""), item.get("value", "")) for item in items]


def _tpu_items(clients, project: str, zone: str, node: str) -> list[tuple[str, str]]:
    """Host 0's entries: it is the host SSH reaches (the node's first network endpoint)."""
    from google.cloud import tpu_v2

    answer = clients.tpu.get_guest_attributes(
        request=tpu_v2.GetGuestAttributesRequest(
            name=f"projects/{project}/locations/{zone}/nodes/{node}",
            query_path=HOSTKEYS_PATH,
            worker_ids=["0"],
        ),
        timeout=LOOKUP_TIMEOUT,
    )
    return [(item.namespace, item.value) for attributes in answer.guest_attributes
            for item in attributes.query_value.items]


def credentials_may_exist() -> bool:
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


def _first_line(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
