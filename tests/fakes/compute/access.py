"""Each fake route's access rule: the discovery method whose scopes it takes, the IAM
permission it needs and on what resource, and how the API words a refusal.

Permissions per method: https://cloud.google.com/compute/docs/reference/rest/v1/instances/insert
(and each method page's "IAM Permissions"), https://cloud.google.com/storage/docs/
json_api/v1/objects/get ("Required permission: storage.objects.get"),
https://cloud.google.com/secret-manager/docs/access-control, https://cloud.google.com/tpu/
docs/reference/rest/v2/projects.locations.nodes/create, https://cloud.google.com/iam/docs/
reference/rest/v1/projects.serviceAccounts/create, https://cloud.google.com/
resource-manager/reference/rest/v1/projects/setIamPolicy. The refusal texts are each API's:
Compute "Required 'compute.instances.create' permission for 'projects/p/zones/z/instances/x'",
Cloud Storage "<who> does not have storage.objects.get access to the Google Cloud Storage
object. Permission 'storage.objects.get' denied on resource (or it may not exist).", the
newer APIs "Permission '<p>' denied on resource '<name>' (or it may not exist)."
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.compute.cloud import ApiError
from tests.fakes.compute.identity import Token, check_scopes, granted

P = dict[str, str]


@dataclass(frozen=True)
class Rule:
    document: str  # discovery document, e.g. "compute.v1"
    method_id: str  # its method id, whose `scopes` the call needs
    permission: str  # "" for a public API that any authenticated caller may call
    resource: Callable[[P, Any], str]  # the resource the permission is checked on
    wording: str = "compute"  # how the API words a refusal: compute, storage or newer


def _zone(kind: str, key: str = "name") -> Callable[[P, Any], str]:
    return lambda p, _b: f"projects/{p['project']}/zones/{p['zone']}/{kind}/{p.get(key, '')}"


def _project(p: P, _b: Any) -> str:
    return f"projects/{p['project']}"


def _zone_only(p: P, _b: Any) -> str:
    return f"projects/{p['project']}/zones/{p['zone']}"


def _global(kind: str) -> Callable[[P, Any], str]:
    return lambda p, _b: f"projects/{p['project']}/global/{kind}/{p['name']}"


def _region(kind: str) -> Callable[[P, Any], str]:
    return lambda p, _b: f"projects/{p['project']}/regions/{p['region']}/{kind}/{p.get('name', '')}"


def _tpu(kind: str) -> Callable[[P, Any], str]:
    return lambda p, _b: f"projects/{p['project']}/locations/{p['zone']}/{kind}/{p.get('name', '')}"


def _account(p: P, _b: Any) -> str:
    return f"projects/{p['project']}/serviceAccounts/{p['email']}"


def _secret(p: P, _b: Any) -> str:
    return f"projects/{p['project']}/secrets/{p['secret']}"


def _version(p: P, _b: Any) -> str:
    return f"projects/{p['project']}/secrets/{p['secret']}/versions/{p['version']}"


def _inserted(p: P, body: Any) -> str:
    return f"projects/{p['project']}/zones/{p['zone']}/instances/{(body or {}).get('name', '')}"


def _bulk(p: P, body: Any) -> str:
    names = list(((body or {}).get("perInstanceProperties") or {}).keys()) or [""]
    return f"projects/{p['project']}/zones/{p['zone']}/instances/{names[0]}"


def _compute(method: str, permission: str, resource: Callable[[P, Any], str]) -> Rule:
    return Rule("compute.v1", f"compute.{method}", permission, resource)


_I = _zone("instances")
_OPS = _zone("operations")
RULES: dict[str, Rule] = {
    "aggregatedList": _compute("instances.aggregatedList", "compute.instances.list", _project),
    "bulkInsert": _compute("instances.bulkInsert", "compute.instances.create", _bulk),
    "list": _compute("instances.list", "compute.instances.list", _zone_only),
    "insert": _compute("instances.insert", "compute.instances.create", _inserted),
    "get": _compute("instances.get", "compute.instances.get", _I),
    "delete": _compute("instances.delete", "compute.instances.delete", _I),
    "stop": _compute("instances.stop", "compute.instances.stop", _I),
    "start": _compute("instances.start", "compute.instances.start", _I),
    "setLabels": _compute("instances.setLabels", "compute.instances.setLabels", _I),
    "setMetadata": _compute("instances.setMetadata", "compute.instances.setMetadata", _I),
    "setMachineType": _compute("instances.setMachineType", "compute.instances.setMachineType",
                               _I),
    "getGuestAttributes": _compute("instances.getGuestAttributes",
                                   "compute.instances.getGuestAttributes", _I),
    "operations.get": _compute("zoneOperations.get", "compute.zoneOperations.get", _OPS),
    "wait": _compute("zoneOperations.wait", "compute.zoneOperations.get", _OPS),
    "zoneOperations.list": _compute("zoneOperations.list", "compute.zoneOperations.list",
                                    _zone_only),
    "zones.list": _compute("zones.list", "compute.zones.list", _project),
    "machineTypes.get": _compute("machineTypes.get", "compute.machineTypes.get",
                                 _zone("machineTypes")),
    "acceleratorTypes.get": _compute("acceleratorTypes.get", "compute.acceleratorTypes.get",
                                     _zone("acceleratorTypes")),
    "reservations.get": _compute("reservations.get", "compute.reservations.get",
                                 _zone("reservations")),
    "reservations.list": _compute("reservations.list", "compute.reservations.list",
                                  _zone_only),
    "regions.get": _compute("regions.get", "compute.regions.get",
                            lambda p, _b: f"projects/{p['project']}/regions/{p['region']}"),
    "platform.globalOperations.get": _compute(
        "globalOperations.get", "compute.globalOperations.get",
        lambda p, _b: f"projects/{p['project']}/global/operations/{p['name']}"),
    "platform.computeProjects.get": _compute("projects.get", "compute.projects.get", _project),
    "platform.computeProjects.setCommonInstanceMetadata": _compute(
        "projects.setCommonInstanceMetadata", "compute.projects.setCommonInstanceMetadata",
        _project),
    "subnetworks.list": _compute("subnetworks.list", "compute.subnetworks.list",
                                 _region("subnetworks")),
    "subnetworks.get": _compute("subnetworks.get", "compute.subnetworks.get",
                                _region("subnetworks")),
    "firewalls.list": _compute("firewalls.list", "compute.firewalls.list", _project),
    "networks.insert": _compute("networks.insert", "compute.networks.create", _project),
    "networks.get": _compute("networks.get", "compute.networks.get", _global("networks")),
    "networks.delete": _compute("networks.delete", "compute.networks.delete",
                                _global("networks")),
    "subnetworks.insert": _compute("subnetworks.insert", "compute.subnetworks.create",
                                   _region("subnetworks")),
    "subnetworks.delete": _compute("subnetworks.delete", "compute.subnetworks.delete",
                                   _region("subnetworks")),
    "platform.firewalls.insert": _compute("firewalls.insert", "compute.firewalls.create",
                                          _project),
    "platform.firewalls.list": _compute("firewalls.list", "compute.firewalls.list", _project),
    "platform.firewalls.get": _compute("firewalls.get", "compute.firewalls.get",
                                         _global("firewalls")),
    "platform.firewalls.patch": _compute("firewalls.patch", "compute.firewalls.update",
                                         _global("firewalls")),
    "platform.firewalls.delete": _compute("firewalls.delete", "compute.firewalls.delete",
                                         _global("firewalls")),
    "platform.disks.insert": _compute("disks.insert", "compute.disks.create", _zone_only),
    "platform.disks.get": _compute("disks.get", "compute.disks.get", _zone("disks")),
    "platform.disks.delete": _compute("disks.delete", "compute.disks.delete", _zone("disks")),
    "platform.subnetworks.list": _compute("subnetworks.list", "compute.subnetworks.list",
                                          _region("subnetworks")),
    "platform.routers.insert": _compute("routers.insert", "compute.routers.create",
                                        _region("routers")),
    "platform.routers.get": _compute("routers.get", "compute.routers.get", _region("routers")),
    "platform.routers.patch": _compute("routers.patch", "compute.routers.update",
                                       _region("routers")),
    "platform.routers.delete": _compute("routers.delete", "compute.routers.delete",
                                        _region("routers")),
    # What `invoke catalog-refresh` reads (tests/fakes/compute/listings.py).
    "listing.regions.list": _compute("regions.list", "compute.regions.list", _project),
    "listing.machineTypes.aggregatedList": _compute(
        "machineTypes.aggregatedList", "compute.machineTypes.list", _project),
    "listing.acceleratorTypes.aggregatedList": _compute(
        "acceleratorTypes.aggregatedList", "compute.acceleratorTypes.list", _project),
}


def _newer(document: str, method: str, permission: str,
           resource: Callable[[P, Any], str]) -> Rule:
    return Rule(document, method, permission, resource, "newer")


_SA = "iam.projects.serviceAccounts."
_SM = "secretmanager.projects.secrets."
_TPU = "tpu.projects.locations."
RULES.update({
    "platform.projects.get": _newer("cloudresourcemanager.v1", "cloudresourcemanager.projects.get",
                                    "resourcemanager.projects.get", _project),
    "platform.projects.getIamPolicy": _newer(
        "cloudresourcemanager.v1", "cloudresourcemanager.projects.getIamPolicy",
        "resourcemanager.projects.getIamPolicy", _project),
    "platform.projects.setIamPolicy": _newer(
        "cloudresourcemanager.v1", "cloudresourcemanager.projects.setIamPolicy",
        "resourcemanager.projects.setIamPolicy", _project),
    "platform.serviceAccounts.create": _newer("iam.v1", _SA + "create",
                                              "iam.serviceAccounts.create", _project),
    "platform.serviceAccounts.get": _newer("iam.v1", _SA + "get", "iam.serviceAccounts.get",
                                           _account),
    "platform.serviceAccounts.patch": _newer("iam.v1", _SA + "patch",
                                             "iam.serviceAccounts.update", _account),
    "platform.serviceAccounts.delete": _newer("iam.v1", _SA + "delete",
                                              "iam.serviceAccounts.delete", _account),
    "platform.serviceAccounts.getIamPolicy": _newer(
        "iam.v1", _SA + "getIamPolicy", "iam.serviceAccounts.getIamPolicy", _account),
    "platform.serviceAccounts.setIamPolicy": _newer(
        "iam.v1", _SA + "setIamPolicy", "iam.serviceAccounts.setIamPolicy", _account),
    "platform.services.get": _newer("serviceusage.v1", "serviceusage.services.get",
                                    "serviceusage.services.get", _project),
    "platform.services.enable": _newer("serviceusage.v1", "serviceusage.services.enable",
                                       "serviceusage.services.enable", _project),
    "serviceusage.consumerQuotaMetrics.list": _newer(
        "serviceusage.v1beta1", "serviceusage.services.consumerQuotaMetrics.list",
        "serviceusage.quotas.get", _project),
    "platform.secrets.create": _newer("secretmanager.v1", _SM + "create",
                                      "secretmanager.secrets.create", _project),
    "platform.secrets.get": _newer("secretmanager.v1", _SM + "get", "secretmanager.secrets.get",
                                   _secret),
    "platform.secrets.patch": _newer("secretmanager.v1", _SM + "patch",
                                     "secretmanager.secrets.update", _secret),
    "platform.secrets.delete": _newer("secretmanager.v1", _SM + "delete",
                                      "secretmanager.secrets.delete", _secret),
    "platform.secrets.addVersion": _newer("secretmanager.v1", _SM + "addVersion",
                                          "secretmanager.versions.add", _secret),
    "platform.versions.get": _newer("secretmanager.v1", _SM + "versions.get",
                                    "secretmanager.versions.get", _version),
    "platform.versions.access": _newer("secretmanager.v1", _SM + "versions.access",
                                       "secretmanager.versions.access", _version),
    "platform.versions.destroy": _newer("secretmanager.v1", _SM + "versions.destroy",
                                        "secretmanager.versions.destroy", _version),
    "platform.secrets.getIamPolicy": _newer("secretmanager.v1", _SM + "getIamPolicy",
                                            "secretmanager.secrets.getIamPolicy", _secret),
    "platform.secrets.setIamPolicy": _newer("secretmanager.v1", _SM + "setIamPolicy",
                                            "secretmanager.secrets.setIamPolicy", _secret),
    "tpu.create": _newer("tpu.v2", _TPU + "nodes.create", "tpu.nodes.create",
                         lambda p, _b: f"projects/{p['project']}/locations/{p['zone']}"),
    "tpu.list": _newer("tpu.v2", _TPU + "nodes.list", "tpu.nodes.list",
                       lambda p, _b: f"projects/{p['project']}/locations/{p['zone']}"),
    "tpu.get": _newer("tpu.v2", _TPU + "nodes.get", "tpu.nodes.get", _tpu("nodes")),
    "tpu.delete": _newer("tpu.v2", _TPU + "nodes.delete", "tpu.nodes.delete", _tpu("nodes")),
    "tpu.stop": _newer("tpu.v2", _TPU + "nodes.stop", "tpu.nodes.stop", _tpu("nodes")),
    "tpu.start": _newer("tpu.v2", _TPU + "nodes.start", "tpu.nodes.start", _tpu("nodes")),
    "tpu.patch": _newer("tpu.v2", _TPU + "nodes.patch", "tpu.nodes.update", _tpu("nodes")),
    "tpu.getGuestAttributes": _newer("tpu.v2", _TPU + "nodes.getGuestAttributes",
                                     "tpu.nodes.get", _tpu("nodes")),
    "tpu.operations.get": _newer("tpu.v2", _TPU + "operations.get", "tpu.operations.get",
                                 _tpu("operations")),
    "tpu.queuedResources.create": _newer(
        "tpu.v2", _TPU + "queuedResources.create", "tpu.queuedResources.create",
        lambda p, _b: f"projects/{p['project']}/locations/{p['zone']}"),
    "tpu.queuedResources.list": _newer(
        "tpu.v2", _TPU + "queuedResources.list", "tpu.queuedResources.list",
        lambda p, _b: f"projects/{p['project']}/locations/{p['zone']}"),
    "tpu.queuedResources.get": _newer("tpu.v2", _TPU + "queuedResources.get",
                                      "tpu.queuedResources.get", _tpu("queuedResources")),
    "tpu.queuedResources.delete": _newer("tpu.v2", _TPU + "queuedResources.delete",
                                         "tpu.queuedResources.delete", _tpu("queuedResources")),
    # https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.acceleratorTypes/get
    # (IAM: tpu.acceleratortypes.get, lower case as the TPU API names it)
    "tpu.acceleratorTypes.get": _newer("tpu.v2", _TPU + "acceleratorTypes.get",
                                       "tpu.acceleratortypes.get", _tpu("acceleratorTypes")),
    "listing.tpu.locations.list": _newer("tpu.v2", "tpu.projects.locations.list",
                                         "tpu.locations.list", _project),
    "listing.tpu.acceleratorTypes.list": _newer(
        "tpu.v2", _TPU + "acceleratorTypes.list", "tpu.acceleratortypes.list",
        lambda p, _b: f"projects/{p['project']}/locations/{p['zone']}"),
    # The Cloud Billing Catalog is public: any authenticated caller lists SKUs, no IAM
    # permission (https://cloud.google.com/billing/docs/how-to/get-pricing-information-api).
    "listing.billing.skus.list": Rule("cloudbilling.v1", "cloudbilling.services.skus.list", "",
                                      lambda p, _b: f"services/{p['service']}", "newer"),
})

# Cloud Storage (tests/fakes/compute/storage.py's method ids are the discovery document's).
_B = lambda p, _b: f"projects/_/buckets/{p['bucket']}"  # noqa: E731
_NEW = lambda p, _b: f"projects/{p['project']}"  # noqa: E731 (a bucket is made in a project)
_O = lambda p, _b: f"projects/_/buckets/{p['bucket']}/objects/{p.get('object', '')}"  # noqa: E731
STORAGE_RULES: dict[str, Rule] = {
    method: Rule("storage.v1", method, permission, resource, "storage")
    for method, permission, resource in [
        ("storage.buckets.insert", "storage.buckets.create", _NEW),
        ("storage.buckets.get", "storage.buckets.get", _B),
        ("storage.buckets.delete", "storage.buckets.delete", _B),
        ("storage.buckets.getIamPolicy", "storage.buckets.getIamPolicy", _B),
        ("storage.buckets.setIamPolicy", "storage.buckets.setIamPolicy", _B),
        ("storage.objects.list", "storage.objects.list", _B),
        ("storage.objects.delete", "storage.objects.delete", _O),
        ("storage.objects.insert", "storage.objects.create", _O),
        ("storage.objects.get", "storage.objects.get", _O),
    ]
}

_SERVICES = {"compute.v1": "compute.googleapis.com", "tpu.v2": "tpu.googleapis.com",
             "storage.v1": "storage.googleapis.com", "iam.v1": "iam.googleapis.com",
             "secretmanager.v1": "secretmanager.googleapis.com",
             "cloudresourcemanager.v1": "cloudresourcemanager.googleapis.com",
             "serviceusage.v1": "serviceusage.googleapis.com",
             "serviceusage.v1beta1": "serviceusage.googleapis.com",
             "cloudbilling.v1": "cloudbilling.googleapis.com"}


def refusal(rule: Rule, token: Token, permission: str, resource: str) -> ApiError:
    """The 403 the API answers for a missing permission, in its own words."""
    if rule.wording == "compute":
        return ApiError(403, f"Required '{permission}' permission for '{resource}'",
                        "forbidden")
    if rule.wording == "storage":
        what = ("Google Cloud Storage object" if "/objects/" in resource
                else "Google Cloud Storage bucket" if "/buckets/" in resource
                else "Google Cloud project")
        return ApiError(403, f"{token.email} does not have {permission} access to the {what}. "
                        f"Permission '{permission}' denied on resource (or it may not exist).",
                        "forbidden")
    return ApiError(403, f"Permission '{permission}' denied on resource '{resource}' (or it "
                    "may not exist).", "forbidden", "PERMISSION_DENIED",
                    details=[{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                              "reason": "IAM_PERMISSION_DENIED", "domain": "iam.googleapis.com",
                              "metadata": {"permission": permission, "resource": resource}}])


def act_as_refusal(email: str) -> ApiError:
    """Attaching a service account without iam.serviceAccounts.actAs on it."""
    return ApiError(403, f"Permission 'iam.serviceAccounts.actAs' denied on service account "
                    f"{email} (or it may not exist).", "forbidden", "PERMISSION_DENIED")


def authorize(rule: Rule, token: Token, params: P, body: Any,
              policies: list[dict[str, Any]]) -> None:
    """Scope first (Google answers a token's scope before looking at IAM), then IAM."""
    check_scopes(token, rule.document, rule.method_id, _SERVICES[rule.document])
    if rule.permission and not granted(token.principal, rule.permission, policies):
        raise refusal(rule, token, rule.permission, rule.resource(params, body))


def attached_accounts(method: str, body: Any) -> list[str]:
    """The service accounts an insert attaches (instance, bulk, TPU node, queued slice)."""
    body = body or {}
    if method == "bulkInsert":
        body = body.get("instanceProperties") or {}
    if method == "tpu.queuedResources.create":
        specs = ((body.get("tpu") or {}).get("nodeSpec") or [])
        return [e for spec in specs
                for e in attached_accounts("tpu.create", spec.get("node") or {})]
    accounts = body.get("serviceAccounts") or []
    if isinstance(body.get("serviceAccount"), dict):
        accounts = [body["serviceAccount"]]
    return [str(a.get("email")) for a in accounts if isinstance(a, dict) and a.get("email")]
