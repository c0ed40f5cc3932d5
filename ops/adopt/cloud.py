"""What Ray's launcher made for a cluster, read from Google's REST APIs (read only): the
instances labelled `ray-cluster-name=<name>` in the YAML's zone (as Ray's GCPNodeProvider lists
them), the `ray-autoscaler-sa-v1` account and the project roles it holds (Resource Manager
getIamPolicy), the project-wide `ssh-keys` metadata where `bootstrap_gcp` put its key, and the
firewall rules of the project (Ray's GCP launcher makes none; any aimed at the cluster's tags
is shown).

One AuthorizedSession with the cluster's own credentials (the YAML's `provider.gcp_credentials`,
else ADC); RAY_GCP_API_ENDPOINT points it at an emulator or the tests' fake over plain http.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from model.config import ClusterConfig
from model.labels import CLUSTER_NAME
from ops.cloud.cloud_api import rest_session, rest_url
from ops.errors import OpsError, missing_role

COMPUTE = "https://compute.googleapis.com/compute/v1"
IAM = "https://iam.googleapis.com/v1"
CRM = "https://cloudresourcemanager.googleapis.com/v1"
TIMEOUT_S = 60.0


@dataclass
class RayMade:
    """Everything read, as the APIs answered (instances oldest first)."""

    instances: list[dict[str, Any]]
    account: dict[str, Any] | None
    account_roles: list[str]
    ssh_keys: list[str]
    """The project's `ssh-keys` metadata lines."""
    firewalls: list[dict[str, Any]] = field(default_factory=list)


class _Api:
    def __init__(self, config: ClusterConfig) -> None:
        self.session, self.endpoint = rest_session(config)

    def url(self, base: str, path: str) -> str:
        return rest_url(self.endpoint, base, path)

    def call(self, verb: str, base: str, path: str, params: dict[str, str] | None = None,
             body: Any = None, missing_ok: bool = False) -> Any:
        answer = self.session.request(verb, self.url(base, path), params=params, json=body,
                                      timeout=TIMEOUT_S)
        if answer.status_code == 404 and missing_ok:
            return None
        if answer.status_code != 200:
            try:
                message = answer.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = answer.text[:200]
            raise OpsError(f"reading the cluster `ray up` made failed: {verb} {path}: "
                           f"{answer.status_code} {message}{missing_role(message)}")
        return answer.json()

    def pages(self, base: str, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            page = self.call("GET", base, path, {**params, **({"pageToken": token}
                                                             if token else {})})
            items += page.get("items") or []
            token = page.get("nextPageToken") or ""
            if not token:
                return items


def read_ray_made(config: ClusterConfig) -> RayMade:
    """What Ray's launcher made for `config`'s cluster, in its project and zone."""
    from google.auth.exceptions import GoogleAuthError
    from requests import RequestException

    try:
        return _read(_Api(config), config)
    except GoogleAuthError as exc:
        raise OpsError("no usable Google Cloud credentials: set provider.gcp_credentials in "
                       "the cluster YAML or run `gcloud auth application-default login` "
                       f"({exc})") from None
    except RequestException as exc:
        raise OpsError(f"reading the cluster `ray up` made failed: the API did not answer "
                       f"({exc})") from None


def _read(api: _Api, config: ClusterConfig) -> RayMade:
    project, zone = config.provider.project, config.provider.availability_zone
    instances = api.pages(COMPUTE, f"projects/{project}/zones/{zone}/instances", {
        "filter": f"(labels.{CLUSTER_NAME} = {config.cluster_name})"})
    instances.sort(key=lambda i: (i.get("creationTimestamp") or "", i["name"]))
    email = config.autoscaler_service_account_email
    account = api.call("GET", IAM, f"projects/{project}/serviceAccounts/{email}",
                       missing_ok=True)
    policy = api.call("POST", CRM, f"projects/{project}:getIamPolicy", body={})
    member = f"serviceAccount:{email}"
    roles = sorted(b["role"] for b in policy.get("bindings") or []
                   if member in (b.get("members") or []))
    metadata = api.call("GET", COMPUTE, f"projects/{project}").get(
        "commonInstanceMetadata") or {}
    keys = next((item.get("value") or "" for item in metadata.get("items") or []
                 if item.get("key") == "ssh-keys"), "")
    firewalls = api.pages(COMPUTE, f"projects/{project}/global/firewalls", {})
    return RayMade(instances=instances, account=account, account_roles=roles,
                   ssh_keys=[line for line in keys.splitlines() if line.strip()],
                   firewalls=firewalls)
