"""The rest of a project a cluster touches, beside instances and TPU nodes: Compute firewalls,
disks, subnetworks and Cloud Routers (a Cloud NAT is an element of its router's `nats`, written
with routers.patch), IAM service accounts (and their IAM policies), Resource Manager projects
and IAM policies,
Service Usage services and Secret Manager secrets (with versions and IAM policies).

Paths and bodies are the real REST APIs' (Compute v1, IAM v1, Cloud Resource Manager v1,
Service Usage v1, Secret Manager v1); their writes finish at once (a done operation where the
API answers with one). Every region has a `default` subnetwork on the `default` network.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from tests.fakes.compute.cloud import COMPUTE, ApiError, check_labels
from tests.fakes.compute.identity import USER, USER_ROLES

PROJECT_NUMBER = "123456789012"
_CRM = r"/v1/projects/(?P<project>[^/:]+)"
_PROJECT = r"/compute/v1/projects/(?P<project>[^/]+)"

ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (verb, re.compile(pattern + "$"), "platform." + method)
    for verb, pattern, method in [
        ("POST", _PROJECT + r"/global/firewalls", "firewalls.insert"),
        ("GET", _PROJECT + r"/global/firewalls", "firewalls.list"),
        ("GET", _PROJECT + r"/global/firewalls/(?P<name>[^/]+)", "firewalls.get"),
        ("PATCH", _PROJECT + r"/global/firewalls/(?P<name>[^/]+)", "firewalls.patch"),
        ("DELETE", _PROJECT + r"/global/firewalls/(?P<name>[^/]+)", "firewalls.delete"),
        ("POST", _PROJECT + r"/zones/(?P<zone>[^/]+)/disks", "disks.insert"),
        ("GET", _PROJECT + r"/zones/(?P<zone>[^/]+)/disks/(?P<name>[^/]+)", "disks.get"),
        ("DELETE", _PROJECT + r"/zones/(?P<zone>[^/]+)/disks/(?P<name>[^/]+)", "disks.delete"),
        ("GET", _PROJECT + r"/regions/(?P<region>[^/]+)/subnetworks", "subnetworks.list"),
        ("GET", _PROJECT, "computeProjects.get"),
        ("GET", _PROJECT + r"/global/operations/(?P<name>[^/]+)", "globalOperations.get"),
        ("POST", _PROJECT + r"/setCommonInstanceMetadata",
         "computeProjects.setCommonInstanceMetadata"),
        ("POST", _PROJECT + r"/regions/(?P<region>[^/]+)/routers", "routers.insert"),
        ("GET", _PROJECT + r"/regions/(?P<region>[^/]+)/routers/(?P<name>[^/]+)", "routers.get"),
        ("PATCH", _PROJECT + r"/regions/(?P<region>[^/]+)/routers/(?P<name>[^/]+)",
         "routers.patch"),
        ("DELETE", _PROJECT + r"/regions/(?P<region>[^/]+)/routers/(?P<name>[^/]+)",
         "routers.delete"),
        ("GET", _CRM, "projects.get"),
        ("POST", _CRM + r":getIamPolicy", "projects.getIamPolicy"),
        ("POST", _CRM + r":setIamPolicy", "projects.setIamPolicy"),
        ("POST", _CRM + r"/serviceAccounts", "serviceAccounts.create"),
        ("GET", _CRM + r"/serviceAccounts/(?P<email>[^/:]+)", "serviceAccounts.get"),
        ("PATCH", _CRM + r"/serviceAccounts/(?P<email>[^/:]+)", "serviceAccounts.patch"),
        ("DELETE", _CRM + r"/serviceAccounts/(?P<email>[^/:]+)", "serviceAccounts.delete"),
        ("POST", _CRM + r"/serviceAccounts/(?P<email>[^/:]+):getIamPolicy",
         "serviceAccounts.getIamPolicy"),
        ("POST", _CRM + r"/serviceAccounts/(?P<email>[^/:]+):setIamPolicy",
         "serviceAccounts.setIamPolicy"),
        ("GET", _CRM + r"/services/(?P<service>[^/:]+)", "services.get"),
        ("POST", _CRM + r"/services/(?P<service>[^/:]+):enable", "services.enable"),
        ("POST", _CRM + r"/secrets", "secrets.create"),
        ("GET", _CRM + r"/secrets/(?P<secret>[^/:]+)", "secrets.get"),
        ("PATCH", _CRM + r"/secrets/(?P<secret>[^/:]+)", "secrets.patch"),
        ("DELETE", _CRM + r"/secrets/(?P<secret>[^/:]+)", "secrets.delete"),
        ("POST", _CRM + r"/secrets/(?P<secret>[^/:]+):addVersion", "secrets.addVersion"),
        ("GET", _CRM + r"/secrets/(?P<secret>[^/:]+)/versions/(?P<version>[^/:]+)",
         "versions.get"),
        ("GET", _CRM + r"/secrets/(?P<secret>[^/:]+)/versions/(?P<version>[^/:]+):access",
         "versions.access"),
        ("POST", _CRM + r"/secrets/(?P<secret>[^/:]+)/versions/(?P<version>[^/:]+):destroy",
         "versions.destroy"),
        ("GET", _CRM + r"/secrets/(?P<secret>[^/:]+):getIamPolicy", "secrets.getIamPolicy"),
        ("POST", _CRM + r"/secrets/(?P<secret>[^/:]+):setIamPolicy", "secrets.setIamPolicy"),
    ]
]


def _add_member(policy: dict[str, Any], role: str, member: str) -> None:
    for binding in policy.setdefault("bindings", []):
        if binding["role"] == role:
            if member not in binding.setdefault("members", []):
                binding["members"].append(member)
            return
    policy["bindings"].append({"role": role, "members": [member]})


def _not_found(what: str) -> ApiError:
    return ApiError(404, f"The resource '{what}' was not found", "notFound")


def _fingerprint(items: list[dict[str, str]]) -> str:
    digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode())
    return base64.b64encode(digest.digest()[:8]).decode("ascii")


def _etag(policy: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(policy.get("bindings", []), sort_keys=True).encode())
    return base64.b64encode(digest.digest()[:8]).decode("ascii")


class Platform:
    """Everything but instances and TPU nodes, keyed by project; one lock guards it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.firewalls: dict[str, dict[str, dict[str, Any]]] = {}
        self.disks: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self.accounts: dict[str, dict[str, dict[str, Any]]] = {}
        self.policies: dict[str, dict[str, Any]] = {}
        self.services: dict[str, set[str]] = {}
        self.secrets: dict[str, dict[str, dict[str, Any]]] = {}
        self.versions: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.secret_policies: dict[tuple[str, str], dict[str, Any]] = {}
        self.routers: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self.account_policies: dict[tuple[str, str], dict[str, Any]] = {}
        self.common_metadata: dict[str, list[dict[str, str]]] = {}
        self.global_operations: dict[tuple[str, str], dict[str, Any]] = {}

    def project_policy(self, project: str) -> dict[str, Any]:
        """The project's IAM policy; a project starts as its owner made it: the user (USER)
        holding the roles docs/security.md asks of whoever runs the tasks (USER_ROLES)."""
        with self.lock:
            return self.policies.setdefault(project, {"version": 1, "bindings": [
                {"role": role, "members": [USER]} for role in USER_ROLES]})

    def grant(self, project: str, role: str, member: str) -> None:
        """Add `member` to `role` in the project's policy (an admin's grant)."""
        with self.lock:
            _add_member(self.project_policy(project), role, member)

    def revoke(self, project: str, role: str, member: str) -> None:
        with self.lock:
            for binding in self.project_policy(project)["bindings"]:
                if binding["role"] == role and member in binding.get("members", []):
                    binding["members"].remove(member)

    def grant_on_account(self, project: str, email: str, role: str, member: str) -> None:
        with self.lock:
            policy = self.account_policies.setdefault((project, email),
                                                      {"version": 1, "bindings": []})
            _add_member(policy, role, member)

    def grant_on_secret(self, project: str, secret: str, role: str, member: str) -> None:
        with self.lock:
            policy = self.secret_policies.setdefault((project, secret),
                                                     {"version": 1, "bindings": []})
            _add_member(policy, role, member)

    def resource_policies(self, method: str, p: dict[str, str]) -> list[dict[str, Any]]:
        """The policies that decide a call: the project's, and the secret's or service
        account's own when the call is on one (a grant there covers it alone)."""
        with self.lock:
            found = [self.project_policy(p["project"])]
            if "secret" in p:
                found.append(self.secret_policies.get((p["project"], p["secret"]), {}))
            if "email" in p:
                found.append(self.account_policies.get((p["project"], p["email"]), {}))
            return found

    def handle(self, method: str, p: dict[str, str], query: dict[str, str], body: Any) -> Any:
        handler: Callable[[dict[str, str], dict[str, str], Any], Any] = getattr(
            self, "_" + method.removeprefix("platform.").replace(".", "_"))
        with self.lock:
            return handler(p, query, body)

    def is_empty(self, project: str) -> dict[str, list[str]]:
        """What the project still holds, by collection (empty lists: nothing)."""
        with self.lock:
            return {
                "firewalls": sorted(self.firewalls.get(project, {})),
                "disks": sorted(n for (p, _), d in self.disks.items() if p == project for n in d),
                "secrets": sorted(self.secrets.get(project, {})),
                "routers": sorted(n for (p, _), r in self.routers.items() if p == project
                                  for n in r),
            }

    def _done(self, project: str, op_type: str, target: str,
              scope: str = "global") -> dict[str, Any]:
        name = f"operation-{op_type}-{abs(hash(target))}"
        operation = {"kind": "compute#operation", "name": name, "operationType": op_type,
                     "targetLink": target, "status": "DONE", "progress": 100,
                     "selfLink": f"{COMPUTE}/projects/{project}/{scope}/operations/{name}"}
        if scope == "global":
            self.global_operations[(project, name)] = operation
        return operation

    def _globalOperations_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        """A global operation this fake answered with (each is done at once)
        (https://cloud.google.com/compute/docs/reference/rest/v1/globalOperations/get)."""
        found = self.global_operations.get((p["project"], p["name"]))
        if found is None:
            raise _not_found(f"projects/{p['project']}/global/operations/{p['name']}")
        return copy.deepcopy(found)

    # ------------------------------------------------------------------ Compute

    def _firewalls_insert(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        name = body.get("name")
        if not name or not body.get("network"):
            raise ApiError(400, "Invalid value for field 'resource.network': ''")
        store = self.firewalls.setdefault(p["project"], {})
        link = f"{COMPUTE}/projects/{p['project']}/global/firewalls/{name}"
        if name in store:
            raise ApiError(409, f"The resource '{link}' already exists", "alreadyExists")
        store[name] = {**copy.deepcopy(body), "kind": "compute#firewall", "selfLink": link,
                       "id": str(abs(hash(link)) % 10**18),
                       "creationTimestamp": "2024-01-01T00:00:00.000-00:00"}
        return self._done(p["project"], "insert", link)

    def _computeProjects_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        """Compute's view of the project: its project-wide metadata (`ssh-keys`: Ray's key)
        with the fingerprint a write must name
        (https://cloud.google.com/compute/docs/reference/rest/v1/projects/get)."""
        items = copy.deepcopy(self.common_metadata.get(p["project"], []))
        return {"kind": "compute#project", "name": p["project"], "id": PROJECT_NUMBER,
                "selfLink": f"{COMPUTE}/projects/{p['project']}",
                "commonInstanceMetadata": {"kind": "compute#metadata",
                                           "fingerprint": _fingerprint(items),
                                           **({"items": items} if items else {})}}

    def _computeProjects_setCommonInstanceMetadata(  # noqa: N802
            self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        """The whole project-wide metadata replaced, only with the current fingerprint: "An
        up-to-date fingerprint must be provided in order to modify metadata", else 412
        conditionNotMet (https://cloud.google.com/compute/docs/reference/rest/v1/projects/
        setCommonInstanceMetadata, https://cloud.google.com/compute/docs/metadata/
        setting-custom-metadata#etags)."""
        current = self.common_metadata.get(p["project"], [])
        if (body or {}).get("fingerprint") != _fingerprint(current):
            raise ApiError(412, "Supplied fingerprint does not match current metadata "
                                "fingerprint.", "conditionNotMet")
        self.common_metadata[p["project"]] = copy.deepcopy((body or {}).get("items") or [])
        return self._done(p["project"], "compute.projects.setCommonInstanceMetadata",
                          f"{COMPUTE}/projects/{p['project']}")

    def _firewalls_list(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return {"items": list(self.firewalls.get(p["project"], {}).values())}

    def _firewalls_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        found = self.firewalls.get(p["project"], {}).get(p["name"])
        if found is None:
            raise _not_found(f"projects/{p['project']}/global/firewalls/{p['name']}")
        return copy.deepcopy(found)

    def _firewalls_patch(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        current = self._firewalls_get(p, q, None)
        self.firewalls[p["project"]][p["name"]] = {**current, **copy.deepcopy(body)}
        return self._done(p["project"], "patch", current["selfLink"])

    def _firewalls_delete(self, p: dict[str, str], q: dict[str, str], _: Any) -> Any:
        current = self._firewalls_get(p, q, None)
        del self.firewalls[p["project"]][p["name"]]
        return self._done(p["project"], "delete", current["selfLink"])

    def _routers_insert(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        name = body.get("name")
        if not name or not body.get("network"):
            raise ApiError(400, "Invalid value for field 'resource.network': ''")
        store = self.routers.setdefault((p["project"], p["region"]), {})
        link = f"{COMPUTE}/projects/{p['project']}/regions/{p['region']}/routers/{name}"
        if name in store:
            raise ApiError(409, f"The resource '{link}' already exists", "alreadyExists")
        store[name] = {**copy.deepcopy(body), "kind": "compute#router", "selfLink": link,
                       "region": f"{COMPUTE}/projects/{p['project']}/regions/{p['region']}",
                       "id": str(abs(hash(link)) % 10**18),
                       "creationTimestamp": "2024-01-01T00:00:00.000-00:00"}
        return self._done(p["project"], "insert", link, f"regions/{p['region']}")

    def _routers_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        found = self.routers.get((p["project"], p["region"]), {}).get(p["name"])
        if found is None:
            raise _not_found(f"projects/{p['project']}/regions/{p['region']}/routers/"
                             f"{p['name']}")
        return copy.deepcopy(found)

    def _routers_patch(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        current = self._routers_get(p, q, None)
        self.routers[(p["project"], p["region"])][p["name"]] = {**current,
                                                                 **copy.deepcopy(body)}
        return self._done(p["project"], "patch", current["selfLink"], f"regions/{p['region']}")

    def _routers_delete(self, p: dict[str, str], q: dict[str, str], _: Any) -> Any:
        current = self._routers_get(p, q, None)
        del self.routers[(p["project"], p["region"])][p["name"]]
        return self._done(p["project"], "delete", current["selfLink"], f"regions/{p['region']}")

    def _disks_insert(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        store = self.disks.setdefault((p["project"], p["zone"]), {})
        name = body.get("name")
        link = f"{COMPUTE}/projects/{p['project']}/zones/{p['zone']}/disks/{name}"
        if name in store:
            raise ApiError(409, f"The resource '{link}' already exists", "alreadyExists")
        store[name] = {**copy.deepcopy(body), "kind": "compute#disk", "selfLink": link,
                       "status": "READY", "id": str(abs(hash(link)) % 10**18),
                       "labels": check_labels(body.get("labels") or {}, "resource.labels")}
        return self._done(p["project"], "insert", link, f"zones/{p['zone']}")

    def _disks_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        found = self.disks.get((p["project"], p["zone"]), {}).get(p["name"])
        if found is None:
            raise _not_found(f"projects/{p['project']}/zones/{p['zone']}/disks/{p['name']}")
        return copy.deepcopy(found)

    def _disks_delete(self, p: dict[str, str], q: dict[str, str], _: Any) -> Any:
        current = self._disks_get(p, q, None)
        del self.disks[(p["project"], p["zone"])][p["name"]]
        return self._done(p["project"], "delete", current["selfLink"], f"zones/{p['zone']}")

    def _subnetworks_list(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        region_link = f"{COMPUTE}/projects/{p['project']}/regions/{p['region']}"
        return {"kind": "compute#subnetworkList", "items": [{
            "kind": "compute#subnetwork", "name": "default", "ipCidrRange": "10.128.0.0/20",
            "network": f"{COMPUTE}/projects/{p['project']}/global/networks/default",
            "region": region_link, "selfLink": f"{region_link}/subnetworks/default",
            "privateIpGoogleAccess": False, "description": ""}]}

    # ------------------------------------------------------ Resource Manager, IAM

    def _projects_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return {"projectNumber": PROJECT_NUMBER, "projectId": p["project"], "name": p["project"],
                "lifecycleState": "ACTIVE", "labels": {}}

    def _projects_getIamPolicy(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        policy = self.project_policy(p["project"])
        return {**copy.deepcopy(policy), "etag": _etag(policy)}

    def _projects_setIamPolicy(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        self.project_policy(p["project"])
        return self._set_policy(self.policies, p["project"], body)

    def _serviceAccounts_getIamPolicy(self, p: dict[str, str], q: dict[str, str],  # noqa: N802
                                      _: Any) -> Any:
        self._serviceAccounts_get(p, q, None)
        policy = self.account_policies.setdefault((p["project"], p["email"]),
                                                  {"version": 1, "bindings": []})
        return {**copy.deepcopy(policy), "etag": _etag(policy)}

    def _serviceAccounts_setIamPolicy(self, p: dict[str, str], q: dict[str, str],  # noqa: N802
                                      body: Any) -> Any:
        self._serviceAccounts_get(p, q, None)
        return self._set_policy(self.account_policies, (p["project"], p["email"]), body)

    def _set_policy(self, store: dict[Any, dict[str, Any]], key: Any, body: Any) -> Any:
        """setIamPolicy with the read-modify-write etag check the real APIs make."""
        current = store.setdefault(key, {"version": 1, "bindings": []})
        policy = body.get("policy") or {}
        if policy.get("etag") and policy["etag"] != _etag(current):
            raise ApiError(409, "There were concurrent policy changes.", "aborted")
        for binding in policy.get("bindings", []):
            if not str(binding.get("role", "")).startswith(("roles/", "projects/")):
                raise ApiError(400, f"Role {binding.get('role')} is not supported.")
        store[key] = {"version": 1, "bindings": copy.deepcopy(policy.get("bindings", []))}
        return {**copy.deepcopy(store[key]), "etag": _etag(store[key])}

    def _serviceAccounts_create(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        account_id = body.get("accountId", "")
        if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])", account_id) \
                or not 6 <= len(account_id) <= 30:
            raise ApiError(400, f"Invalid account id: {account_id}")
        email = f"{account_id}@{p['project']}.iam.gserviceaccount.com"
        store = self.accounts.setdefault(p["project"], {})
        if email in store:
            raise ApiError(409, f"Service account {account_id} already exists within project "
                                f"projects/{p['project']}.", "alreadyExists")
        given = body.get("serviceAccount") or {}
        store[email] = {"name": f"projects/{p['project']}/serviceAccounts/{email}",
                        "projectId": p["project"], "email": email,
                        "uniqueId": str(10**20 + len(store)),
                        "displayName": given.get("displayName", ""),
                        "description": given.get("description", ""),
                        "oauth2ClientId": str(10**20 + len(store))}
        return copy.deepcopy(store[email])

    def _serviceAccounts_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        found = self.accounts.get(p["project"], {}).get(p["email"])
        if found is None:
            raise _not_found(f"projects/{p['project']}/serviceAccounts/{p['email']}")
        return copy.deepcopy(found)

    def _serviceAccounts_patch(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        current = self._serviceAccounts_get(p, q, None)
        given = body.get("serviceAccount") or {}
        for field in (body.get("updateMask") or "").split(","):
            if field in given:
                current[field] = given[field]
        self.accounts[p["project"]][p["email"]] = current
        return copy.deepcopy(current)

    def _serviceAccounts_delete(self, p: dict[str, str], q: dict[str, str], _: Any) -> Any:
        self._serviceAccounts_get(p, q, None)
        del self.accounts[p["project"]][p["email"]]
        return {}

    def _services_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        enabled = p["service"] in self.services.get(p["project"], set())
        return {"name": f"projects/{PROJECT_NUMBER}/services/{p['service']}",
                "state": "ENABLED" if enabled else "DISABLED"}

    def _services_enable(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        self.services.setdefault(p["project"], set()).add(p["service"])
        return {"name": "operations/noop.DONE_OPERATION", "done": True}

    # --------------------------------------------------------------- Secret Manager

    def _secrets_create(self, p: dict[str, str], query: dict[str, str], body: Any) -> Any:
        secret_id = query.get("secretId", "")
        if not re.fullmatch(r"[\w-]{1,255}", secret_id):
            raise ApiError(400, f"Invalid secret id: {secret_id!r}")
        if not body.get("replication"):
            raise ApiError(400, "Secret.replication is required")
        store = self.secrets.setdefault(p["project"], {})
        if secret_id in store:
            raise ApiError(409, f"Secret [projects/{PROJECT_NUMBER}/secrets/{secret_id}] "
                                "already exists.", "alreadyExists")
        store[secret_id] = {**copy.deepcopy(body),
                            "name": f"projects/{PROJECT_NUMBER}/secrets/{secret_id}",
                            "createTime": "2024-01-01T00:00:00Z",
                            "etag": '"1"'}
        return copy.deepcopy(store[secret_id])

    def _secrets_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        found = self.secrets.get(p["project"], {}).get(p["secret"])
        if found is None:
            raise _not_found(f"projects/{p['project']}/secrets/{p['secret']}")
        return copy.deepcopy(found)

    def _secrets_patch(self, p: dict[str, str], query: dict[str, str], body: Any) -> Any:
        current = self._secrets_get(p, query, None)
        for field in (query.get("updateMask") or "").split(","):
            if field:
                current[field] = copy.deepcopy(body.get(field))
        self.secrets[p["project"]][p["secret"]] = current
        return copy.deepcopy(current)

    def _secrets_delete(self, p: dict[str, str], q: dict[str, str], _: Any) -> Any:
        self._secrets_get(p, q, None)
        del self.secrets[p["project"]][p["secret"]]
        self.versions.pop((p["project"], p["secret"]), None)
        self.secret_policies.pop((p["project"], p["secret"]), None)
        return {}

    def _secrets_addVersion(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._secrets_get(p, q, None)
        data = (body.get("payload") or {}).get("data")
        if not data:
            raise ApiError(400, "SecretPayload.data is required")
        versions = self.versions.setdefault((p["project"], p["secret"]), [])
        number = len(versions) + 1
        version = {"name": f"projects/{PROJECT_NUMBER}/secrets/{p['secret']}/versions/{number}",
                   "createTime": "2024-01-01T00:00:00Z", "state": "ENABLED", "data": data}
        versions.append(version)
        return {k: v for k, v in version.items() if k != "data"}

    def _version(self, p: dict[str, str]) -> dict[str, Any]:
        versions = self.versions.get((p["project"], p["secret"]), [])
        number = len(versions) if p["version"] == "latest" else int(p["version"])
        if not 1 <= number <= len(versions):
            raise _not_found(f"projects/{p['project']}/secrets/{p['secret']}/versions/"
                             f"{p['version']}")
        return versions[number - 1]

    def _versions_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return {k: v for k, v in self._version(p).items() if k != "data"}

    def _versions_access(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        version = self._version(p)
        if version["state"] != "ENABLED":
            raise ApiError(400, f"{version['name']} is in DESTROYED state.",
                           "failedPrecondition")
        return {"name": version["name"], "payload": {"data": version["data"]}}

    def _versions_destroy(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        version = self._version(p)
        version["state"], version["data"] = "DESTROYED", ""
        return {k: v for k, v in version.items() if k != "data"}

    def _secrets_getIamPolicy(self, p: dict[str, str], q: dict[str, str], _: Any) -> Any:
        self._secrets_get(p, q, None)
        policy = self.secret_policies.setdefault((p["project"], p["secret"]),
                                                 {"version": 1, "bindings": []})
        return {**copy.deepcopy(policy), "etag": _etag(policy)}

    def _secrets_setIamPolicy(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._secrets_get(p, q, None)
        return self._set_policy(self.secret_policies, (p["project"], p["secret"]), body)
