"""Who is calling, and may they: the bearer token of every call to the fake APIs, checked as
Google checks it.

- **Who.** A token is minted for a principal with a set of OAuth scopes: the user's by the
  token endpoint (`POST /token`, the refresh-token grant of RFC 6749 section 6 that the
  `external_account_authorized_user` Application Default Credentials file of a workforce
  identity federation user makes: https://cloud.google.com/iam/docs/workforce-obtaining-
  short-lived-credentials; google-auth honours that file's `token_url`, while it always
  sends an `authorized_user` file's refresh to oauth2.googleapis.com), a VM's by `vm_token`
  (what a metadata server hands the instance's service account, with the instance's scopes).
  No token, or one never minted:
  401 UNAUTHENTICATED (https://cloud.google.com/apis/design/errors#handling_errors).
- **Scopes.** Each method accepts the scopes its discovery document lists (`scopes` of the
  method in the documents google-api-python-client ships: e.g. `compute.instances.insert`
  takes cloud-platform or compute, `storage.objects.get` also devstorage.read_only); a token
  with none of them: 403 with reason ACCESS_TOKEN_SCOPE_INSUFFICIENT (https://cloud.google.com/
  docs/authentication/troubleshoot-adc and the google.rpc.ErrorInfo of https://cloud.google.com/
  apis/design/errors#error_info).
- **IAM.** A principal has a permission on a resource when a role holding it is bound to the
  principal in the resource's policy or its project's (policy inheritance:
  https://cloud.google.com/iam/docs/resource-hierarchy-access-control). Roles map to
  permissions through `ROLE_PERMISSIONS` (the slice of each predefined role this fake checks,
  cited there). Missing: 403 PERMISSION_DENIED naming the permission as each API words it.
  Attaching a service account to an instance or TPU node needs `iam.serviceAccounts.actAs` on
  the account (https://cloud.google.com/compute/docs/access/service-accounts#sa-permissions,
  https://cloud.google.com/iam/docs/service-account-permissions#user-role).

Imports nothing from the project it judges.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from tests.fakes.compute.cloud import ApiError
from tests.fakes.compute.discovery import discovery_methods
from tests.fakes.compute.json_server import JsonServer

SCOPE = "https://www.googleapis.com/auth/"
CLOUD_PLATFORM = SCOPE + "cloud-platform"
# What `gcloud auth application-default login` grants by default (its --scopes help).
USER_SCOPES = frozenset({CLOUD_PLATFORM, SCOPE + "userinfo.email", "openid",
                         SCOPE + "sqlservice.login"})
# A workforce identity federation user (https://cloud.google.com/iam/docs/principal-identifiers)
WORKFORCE_POOL = "locations/global/workforcePools/fake-pool"
USER = f"principal://iam.googleapis.com/{WORKFORCE_POOL}/subject/tester@example.com"
USER_REFRESH_TOKEN = "fake-user-refresh-token"

# The roles `docs/security.md` ("Who can do what" -> "You, running the tasks") tells a user they
# need; the fake project starts with them bound to USER (tests drop one to see it needed).
USER_ROLES = (
    "roles/compute.admin",
    "roles/iam.serviceAccountAdmin",
    "roles/iam.serviceAccountUser",
    "roles/resourcemanager.projectIamAdmin",
    "roles/secretmanager.admin",
    "roles/storage.admin",
    "roles/serviceusage.serviceUsageAdmin",
    "roles/tpu.admin",
)

_COMPUTE_READ = ("compute.instances.get", "compute.instances.list",
                 "compute.instances.getGuestAttributes", "compute.zoneOperations.get",
                 "compute.zoneOperations.list", "compute.zones.list", "compute.regions.get",
                 "compute.machineTypes.get", "compute.acceleratorTypes.get",
                 "compute.subnetworks.get", "compute.subnetworks.list",
                 "compute.firewalls.get", "compute.firewalls.list", "compute.disks.get",
                 "compute.routers.get", "compute.projects.get", "compute.regions.list",
                 "compute.globalOperations.get",
                 "compute.machineTypes.list", "compute.acceleratorTypes.list",
                 "compute.reservations.get", "compute.reservations.list",
                 "compute.networks.get")
_COMPUTE_INSTANCES = ("compute.instances.create", "compute.instances.delete",
                      "compute.instances.start", "compute.instances.stop",
                      "compute.instances.setLabels", "compute.instances.setMetadata",
                      "compute.instances.setMachineType", "compute.instances.setServiceAccount",
                      "compute.disks.create", "compute.disks.delete")
_COMPUTE_NETWORKS = ("compute.networks.create", "compute.networks.delete",
                     "compute.subnetworks.create", "compute.subnetworks.delete")
_SERVICE_ACCOUNTS = ("iam.serviceAccounts.create", "iam.serviceAccounts.delete",
                     "iam.serviceAccounts.get", "iam.serviceAccounts.list",
                     "iam.serviceAccounts.update", "iam.serviceAccounts.getIamPolicy",
                     "iam.serviceAccounts.setIamPolicy")
_SECRETS = ("secretmanager.secrets.create", "secretmanager.secrets.delete",
            "secretmanager.secrets.get", "secretmanager.secrets.update",
            "secretmanager.secrets.getIamPolicy", "secretmanager.secrets.setIamPolicy",
            "secretmanager.versions.add", "secretmanager.versions.access",
            "secretmanager.versions.destroy", "secretmanager.versions.get")
_OBJECTS = ("storage.objects.create", "storage.objects.delete", "storage.objects.get",
            "storage.objects.list")
_TPU = ("tpu.nodes.create", "tpu.nodes.delete", "tpu.nodes.get", "tpu.nodes.list",
        "tpu.nodes.start", "tpu.nodes.stop", "tpu.nodes.update", "tpu.operations.get",
        "tpu.queuedResources.create", "tpu.queuedResources.delete",
        "tpu.queuedResources.get", "tpu.queuedResources.list", "tpu.acceleratortypes.get",
        "tpu.acceleratortypes.list", "tpu.locations.list")

# Each role's permissions that this fake checks (a slice of the role: the full lists are in
# Google's predefined-roles reference, cited per role).
ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    # https://cloud.google.com/iam/docs/roles-permissions/compute#compute.admin
    # ("Full control of all Compute Engine resources"; it does not hold actAs: "you must also
    # grant the roles/iam.serviceAccountUser role").
    "roles/compute.admin": frozenset({
        *_COMPUTE_READ, *_COMPUTE_INSTANCES, *_COMPUTE_NETWORKS, "compute.firewalls.create",
        "compute.firewalls.delete", "compute.firewalls.update", "compute.routers.create",
        "compute.routers.delete", "compute.routers.update", "compute.instances.osAdminLogin",
        "compute.instances.osLogin", "compute.projects.setCommonInstanceMetadata",
        "resourcemanager.projects.get",
        "serviceusage.quotas.get", "serviceusage.services.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/compute#compute.instanceAdmin.v1
    "roles/compute.instanceAdmin.v1": frozenset({
        *_COMPUTE_INSTANCES, "compute.instances.get", "compute.instances.list",
        "compute.instances.getGuestAttributes", "compute.zoneOperations.get",
        "compute.zoneOperations.list", "compute.zones.list", "compute.machineTypes.get",
        "compute.acceleratorTypes.get", "compute.regions.get", "compute.subnetworks.get",
        "compute.subnetworks.list", "compute.disks.get", "compute.projects.get",
        "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/compute#compute.networkAdmin
    "roles/compute.networkAdmin": frozenset({
        *_COMPUTE_NETWORKS, "compute.networks.get",
        "compute.firewalls.get", "compute.firewalls.list", "compute.routers.create",
        "compute.routers.delete", "compute.routers.get", "compute.routers.update",
        "compute.subnetworks.get", "compute.subnetworks.list", "compute.instances.get",
        "compute.instances.list", "compute.zoneOperations.get", "compute.zoneOperations.list",
        "compute.regions.get", "compute.zones.list", "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/compute#compute.viewer
    # (read-only: get and list, guest attributes included; no data, no changes)
    "roles/compute.viewer": frozenset({*_COMPUTE_READ, "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/compute#compute.osAdminLogin
    "roles/compute.osAdminLogin": frozenset({
        "compute.instances.osAdminLogin", "compute.instances.osLogin",
        "compute.instances.get", "compute.instances.list", "compute.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/compute#compute.osLogin
    "roles/compute.osLogin": frozenset({
        "compute.instances.osLogin", "compute.instances.get", "compute.instances.list",
        "compute.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/iam#iam.serviceAccountUser
    "roles/iam.serviceAccountUser": frozenset({
        "iam.serviceAccounts.actAs", "iam.serviceAccounts.get", "iam.serviceAccounts.list",
        "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/iam#iam.serviceAccountAdmin
    # (no actAs: creating an account is not running as it)
    "roles/iam.serviceAccountAdmin": frozenset({*_SERVICE_ACCOUNTS,
                                                "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/iam#iam.roleViewer
    "roles/iam.roleViewer": frozenset({
        "iam.roles.get", "iam.roles.list", "resourcemanager.projects.get",
        "resourcemanager.projects.getIamPolicy"}),
    # https://cloud.google.com/iam/docs/roles-permissions/resourcemanager#resourcemanager.projectIamAdmin
    "roles/resourcemanager.projectIamAdmin": frozenset({
        "resourcemanager.projects.get", "resourcemanager.projects.getIamPolicy",
        "resourcemanager.projects.setIamPolicy"}),
    # https://cloud.google.com/iam/docs/roles-permissions/secretmanager#secretmanager.admin
    "roles/secretmanager.admin": frozenset({*_SECRETS, "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/secretmanager#secretmanager.secretAccessor
    "roles/secretmanager.secretAccessor": frozenset({"secretmanager.versions.access"}),
    # https://cloud.google.com/iam/docs/roles-permissions/storage#storage.admin
    "roles/storage.admin": frozenset({
        *_OBJECTS, "storage.buckets.create", "storage.buckets.delete", "storage.buckets.get",
        "storage.buckets.list", "storage.buckets.update", "storage.buckets.getIamPolicy",
        "storage.buckets.setIamPolicy", "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/storage#storage.objectAdmin
    "roles/storage.objectAdmin": frozenset({*_OBJECTS, "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/storage#storage.objectViewer
    "roles/storage.objectViewer": frozenset({"storage.objects.get", "storage.objects.list",
                                             "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/tpu#tpu.admin
    "roles/tpu.admin": frozenset({*_TPU, "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/serviceusage#serviceusage.serviceUsageAdmin
    "roles/serviceusage.serviceUsageAdmin": frozenset({
        "serviceusage.services.enable", "serviceusage.services.get",
        "serviceusage.services.list", "serviceusage.quotas.get",
        "resourcemanager.projects.get"}),
    # https://cloud.google.com/iam/docs/roles-permissions/serviceusage#serviceusage.serviceUsageConsumer
    "roles/serviceusage.serviceUsageConsumer": frozenset({
        "serviceusage.services.get", "serviceusage.services.list", "serviceusage.services.use"}),
}


@dataclass(frozen=True)
class Token:
    principal: str  # "user:alice@example.com" or "serviceAccount:x@p.iam.gserviceaccount.com"
    scopes: frozenset[str]

    @property
    def email(self) -> str:
        """The account as error texts name it: a service account's email, a user's subject."""
        return self.principal.rsplit("/", 1)[-1].split(":", 1)[-1]


class Identities:
    """Every token minted in this process (the OAuth endpoint and the fakes share it: a
    provider process refreshes the user's token at one fake and calls another)."""

    def __init__(self) -> None:
        self._tokens: dict[str, Token] = {}
        # refresh token -> (principal, the scopes consented to at login)
        self._refresh: dict[str, tuple[str, frozenset[str]]] = {
            USER_REFRESH_TOKEN: (USER, USER_SCOPES)}
        self._lock = threading.Lock()

    def mint(self, principal: str, scopes: frozenset[str] | set[str] | list[str],
             token: str | None = None) -> str:
        """A new access token for `principal` with `scopes` (or `token` itself, for a test
        that writes a given token into a cluster YAML)."""
        token = token or f"ya29.{secrets.token_urlsafe(24)}"
        with self._lock:
            self._tokens[token] = Token(principal, frozenset(scopes))
        return token

    def user_token(self) -> str:
        return self.mint(USER, USER_SCOPES)

    def vm_token(self, email: str, scopes: list[str] | frozenset[str]) -> str:
        """What the metadata server hands an instance running as `email` with `scopes`."""
        return self.mint(f"serviceAccount:{email}", scopes)

    def refresh_token(self, principal: str, scopes: frozenset[str] | set[str]) -> str:
        """A refresh token for another principal (a second user of a test), whose access
        tokens carry at most `scopes`."""
        token = secrets.token_urlsafe(16)
        with self._lock:
            self._refresh[token] = (principal, frozenset(scopes))
        return token

    def who(self, authorization: str | None) -> Token:
        token = (authorization or "").removeprefix("Bearer ").strip()
        if not token:
            raise ApiError(401, "Request is missing required authentication credential. "
                           "Expected OAuth 2 access token, login cookie or other valid "
                           "authentication credential.", "required", "UNAUTHENTICATED")
        with self._lock:
            found = self._tokens.get(token)
        if found is None:
            raise ApiError(401, "Request had invalid authentication credentials. Expected "
                           "OAuth 2 access token, login cookie or other valid authentication "
                           "credential.", "authError", "UNAUTHENTICATED")
        return found

    def refresh_grant(self, form: bytes) -> tuple[int, dict[str, Any]]:
        """The token endpoint's answer to `grant_type=refresh_token` (RFC 6749 6): a known
        refresh token gives a token with the asked scopes among those it was granted (all of
        them when none is asked)."""
        fields = {key: values[-1] for key, values in parse_qs(form.decode()).items()}
        with self._lock:
            grant = self._refresh.get(fields.get("refresh_token", ""))
        if fields.get("grant_type") != "refresh_token" or grant is None:
            return 400, {"error": "invalid_grant", "error_description": "Bad Request"}
        principal, consented = grant
        asked = frozenset((fields.get("scope") or "").split()) or consented
        if not asked <= consented:
            return 400, {"error": "invalid_scope",
                         "error_description": f"not granted: {sorted(asked - consented)}"}
        return 200, {"access_token": self.mint(principal, asked), "expires_in": 3599,
                     "token_type": "Bearer", "scope": " ".join(sorted(asked))}


def adc_file(token_url: str, refresh_token: str = USER_REFRESH_TOKEN) -> dict[str, Any]:
    """Application Default Credentials as `gcloud auth application-default login` writes them
    for a workforce user, refreshing at `token_url` (google-auth honours an
    `external_account_authorized_user` file's `token_url`)."""
    return {"type": "external_account_authorized_user",
            "audience": f"//iam.googleapis.com/{WORKFORCE_POOL}/providers/fake-provider",
            "client_id": "fake-client-id", "client_secret": "fake-client-secret",
            "refresh_token": refresh_token, "token_url": token_url,
            "token_info_url": token_url.removesuffix("/token") + "/introspect"}


IDENTITIES = Identities()


class TokenEndpoint:
    """Google's OAuth 2.0 token endpoint on 127.0.0.1 (`POST /token`, a form body), minting
    into IDENTITIES; `adc()` is the user's Application Default Credentials file as `gcloud
    auth application-default login` writes it for a workforce user, refreshing here."""

    def __init__(self) -> None:
        self._server = JsonServer(self._answer)

    @staticmethod
    def _answer(verb: str, path: str, _query: dict[str, str], body: bytes,
                _headers: Any) -> tuple[int, Any]:
        if (verb, path) != ("POST", "/token"):
            return 404, {"error": "not_found"}
        return IDENTITIES.refresh_grant(body)

    def __enter__(self) -> TokenEndpoint:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def adc(self) -> dict[str, Any]:
        return adc_file(f"http://{self._server.endpoint}/token")



@contextlib.contextmanager
def signed_in_user() -> Iterator[Path]:
    """The user signed in for this process's fakes, as `gcloud auth application-default
    login` leaves it: a TokenEndpoint here, the ADC file (0600) refreshing at it named by
    GOOGLE_APPLICATION_CREDENTIALS while the block runs (and so for its subprocesses);
    the file's path. The fake projects bind this user to the roles a user needs."""
    with TokenEndpoint() as endpoint, tempfile.TemporaryDirectory(prefix="adc-") as folder:
        path = Path(folder) / "application_default_credentials.json"
        path.touch(mode=0o600)
        path.write_text(json.dumps(endpoint.adc()))
        before = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = str(path)
        try:
            yield path
        finally:
            if before is None:
                os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
            else:
                os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = before

@cache
def discovery_scopes(document: str, method_id: str) -> frozenset[str]:
    """The scopes a method accepts, from its discovery document."""
    try:
        method = discovery_methods(document)[method_id]
    except KeyError:
        raise KeyError(f"{method_id} is not in {document}") from None
    return frozenset(method.get("scopes") or ())


def check_scopes(token: Token, document: str, method_id: str, service: str) -> None:
    accepted = discovery_scopes(document, method_id)
    if token.scopes & accepted:
        return
    raise ApiError(403, "Request had insufficient authentication scopes.",
                   "insufficientPermissions", "PERMISSION_DENIED", details=[{
                       "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                       "reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
                       "domain": "googleapis.com",
                       "metadata": {"service": service, "method": method_id}}])


def granted(principal: str, permission: str, policies: list[dict[str, Any]]) -> bool:
    """Whether a binding of one of `policies` gives `principal` a role holding `permission`
    (`allUsers`/`allAuthenticatedUsers` count as every caller)."""
    for policy in policies:
        for binding in policy.get("bindings") or []:
            members = binding.get("members") or []
            if (principal in members or "allAuthenticatedUsers" in members
                    or "allUsers" in members) \
                    and permission in ROLE_PERMISSIONS.get(binding.get("role", ""), ()):
                return True
    return False
