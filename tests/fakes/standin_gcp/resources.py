"""Each resource type the stand-in knows: inputs (pulumi-gcp's wire names) to API calls, and
API answers back to pulumi-gcp's output shapes, with ids in the forms the Terraform resources
set (`projects/{project}/zones/{zone}/instances/{name}`, ...).

A handler's `create(inputs) -> (id, outputs)`, `read(id, state) -> outputs | None` (None: it
is gone), `update(id, olds, news, state) -> outputs` and `delete(id, state)` each act on the
APIs; `preview(inputs)` is what a create would show before it runs (computed outputs unknown).
"""

from __future__ import annotations

import base64
import copy
import threading
from typing import Any

from tests.fakes.standin_gcp.api import ApiError, Apis
from tests.fakes.standin_gcp.schema import UNKNOWN

POLICY_ATTEMPTS = 5
Outputs = dict[str, Any]


def _short(value: Any) -> Any:
    return value.rsplit("/", 1)[-1] if isinstance(value, str) else value


def _items(metadata: dict[str, Any] | None) -> list[dict[str, str]]:
    return [{"key": k, "value": v} for k, v in sorted((metadata or {}).items())]


def _drop_none(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if v is not None}


def _gce_scheduling(given: dict[str, Any]) -> dict[str, Any]:
    """An instance's scheduling as GCE returns it, its defaults filled (the fake keeps what
    the insert said): automaticRestart true and onHostMaintenance MIGRATE unless preemptible
    or spot, preemptible false, provisioningModel STANDARD
    (https://cloud.google.com/compute/docs/reference/rest/v1/instances, `scheduling`)."""
    spot = bool(given.get("preemptible")) or given.get("provisioningModel") == "SPOT"
    return {"automaticRestart": not spot, "onHostMaintenance": "TERMINATE" if spot
            else "MIGRATE", "preemptible": bool(given.get("preemptible")),
            "provisioningModel": "SPOT" if given.get("provisioningModel") == "SPOT"
            else "STANDARD", **given}


class Handler:
    token = ""
    computed: tuple[str, ...] = ("id",)

    def __init__(self, apis: Apis, defaults: dict[str, Any]) -> None:
        self.apis = apis
        self.defaults = defaults

    def project(self, inputs: dict[str, Any]) -> str:
        return str(inputs.get("project") or self.defaults.get("project") or "")

    def zone(self, inputs: dict[str, Any]) -> str:
        return str(inputs.get("zone") or self.defaults.get("zone") or "")

    def preview(self, inputs: dict[str, Any]) -> Outputs:
        return {**inputs, **{key: UNKNOWN for key in self.computed if key not in inputs}}

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        raise NotImplementedError(self.token)

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        raise NotImplementedError(self.token)

    def update(self, resource_id: str, olds: dict[str, Any], news: dict[str, Any],
               state: dict[str, Any]) -> Outputs:
        """By default an in-place change touches nothing remote the stand-in models."""
        return {**state, **news}

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        raise NotImplementedError(self.token)

    def imported(self, resource_id: str) -> tuple[str, dict[str, Any], Outputs] | None:
        """An import (`pulumi import`, the `import` resource option): the resource `resource_id`
        (its import id) names, read with no state, as (id, inputs, outputs); None when it does
        not exist. The inputs are the bridge's: every input the Terraform resource's Read
        sets in its state (pulumi-terraform-bridge ExtractInputsFromOutputs)."""
        raise ApiError(501, f"the stand-in cannot import {self.token}")


class Instance(Handler):
    """google_compute_instance."""

    token = "gcp:compute/instance:Instance"
    computed = ("id", "selfLink", "instanceId", "currentStatus", "cpuPlatform",
                "labelFingerprint", "metadataFingerprint", "effectiveLabels")

    def preview(self, inputs: dict[str, Any]) -> Outputs:
        outputs = super().preview(inputs)
        outputs["networkInterfaces"] = [
            {**nic, "networkIp": UNKNOWN, "name": UNKNOWN,
             "accessConfigs": [{**a, "natIp": UNKNOWN} for a in nic.get("accessConfigs") or []]}
            for nic in inputs.get("networkInterfaces") or []
        ]
        return outputs

    def _path(self, inputs: dict[str, Any]) -> str:
        return f"projects/{self.project(inputs)}/zones/{self.zone(inputs)}/instances"

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        zone, boot = self.zone(inputs), inputs.get("bootDisk") or {}
        params = boot.get("initializeParams") or {}
        disks = [_drop_none({
            "boot": True, "autoDelete": boot.get("autoDelete", True),
            "deviceName": boot.get("deviceName"), "source": boot.get("source"),
            "initializeParams": _drop_none({
                "sourceImage": params.get("image"), "diskSizeGb": params.get("size"),
                "diskType": (f"zones/{zone}/diskTypes/{_short(params['type'])}"
                             if params.get("type") else None)}) or None,
        })]
        disks += [_drop_none({"source": d.get("source"), "deviceName": d.get("deviceName"),
                              "mode": d.get("mode")}) for d in inputs.get("attachedDisks") or []]
        body = _drop_none({
            "name": inputs["name"],
            "machineType": f"zones/{zone}/machineTypes/{_short(inputs['machineType'])}",
            "disks": disks,
            "networkInterfaces": [_drop_none({
                "network": nic.get("network"), "subnetwork": nic.get("subnetwork"),
                "networkIP": nic.get("networkIp"),
                "accessConfigs": [_drop_none({"type": "ONE_TO_ONE_NAT", "name": "External NAT",
                                              "natIP": a.get("natIp"),
                                              "networkTier": a.get("networkTier")})
                                  for a in nic.get("accessConfigs") or []] or None,
            }) for nic in inputs["networkInterfaces"]],
            "metadata": {"items": _items(inputs.get("metadata"))},
            "labels": inputs.get("labels") or {},
            "tags": {"items": inputs.get("tags") or []},
            "serviceAccounts": ([{"email": inputs["serviceAccount"].get("email"),
                                  "scopes": inputs["serviceAccount"].get("scopes") or []}]
                                if inputs.get("serviceAccount") else None),
            "scheduling": inputs.get("scheduling"),
            "guestAccelerators": [{"acceleratorType": g["type"], "acceleratorCount": g["count"]}
                                  for g in inputs.get("guestAccelerators") or []] or None,
        })
        operation = self.apis.call("compute", "POST", self._path(inputs), body)
        self.apis.wait_compute(operation, self.project(inputs))
        resource_id = f"{self._path(inputs)}/{inputs['name']}"
        live = self.apis.call("compute", "GET", resource_id)
        return resource_id, self._outputs(inputs, live)

    def _outputs(self, inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        metadata = {i["key"]: i.get("value", "") for i in live.get("metadata", {}).get("items", [])}
        nics = []
        for given, nic in zip(inputs.get("networkInterfaces") or [], live["networkInterfaces"],
                              strict=False):
            nics.append({**given, "name": f"nic{len(nics)}", "networkIp": nic.get("networkIP"),
                         "accessConfigs": [{**a, "natIp": b.get("natIP")} for a, b in zip(
                             given.get("accessConfigs") or [], nic.get("accessConfigs") or [],
                             strict=False)]})
        return {
            **inputs,
            "project": self.project(inputs), "zone": self.zone(inputs),
            "id": f"{self._path(inputs)}/{live['name']}",
            "selfLink": live["selfLink"], "instanceId": live["id"],
            "currentStatus": live["status"], "cpuPlatform": "Intel Haswell",
            "machineType": _short(live["machineType"]),
            "labels": inputs.get("labels") or {}, "effectiveLabels": live.get("labels", {}),
            "labelFingerprint": live.get("labelFingerprint", ""),
            "metadata": {k: v for k, v in metadata.items() if k in (inputs.get("metadata") or {})},
            "metadataFingerprint": live.get("metadata", {}).get("fingerprint", ""),
            "networkInterfaces": nics,
        }

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("compute", resource_id)
        return None if live is None else self._outputs(state, live)

    def imported(self, resource_id: str) -> tuple[str, dict[str, Any], Outputs] | None:
        """resource_compute_instance.go's Read: boot_disk from the boot disk (its device name,
        mode, source and initialize_params: image, size, type), network_interface with each
        access config, metadata, labels, tags, the service account, scheduling and guest
        accelerators, machine_type by its name. (The fake keeps a disk inside its instance:
        its initializeParams stand for the disk's own sourceImage, sizeGb and type.)"""
        live = self.apis.get_or_none("compute", resource_id)
        if live is None:
            return None
        _, project, _, zone, _, name = resource_id.split("/")
        boot = next((d for d in live.get("disks") or [] if d.get("boot")), {})
        params = boot.get("initializeParams") or {}
        inputs = _drop_none({
            "name": name, "project": project, "zone": zone,
            "machineType": _short(live["machineType"]),
            "bootDisk": _drop_none({
                "autoDelete": boot.get("autoDelete", True),
                "deviceName": boot.get("deviceName") or "persistent-disk-0",
                "mode": boot.get("mode") or "READ_WRITE",
                "source": boot.get("source"),
                "initializeParams": _drop_none({
                    "image": params.get("sourceImage"),
                    "size": params.get("diskSizeGb"),
                    "type": _short(params.get("diskType") or "pd-standard"),
                }),
            }),
            "networkInterfaces": [_drop_none({
                "network": nic.get("network"), "subnetwork": nic.get("subnetwork"),
                "networkIp": nic.get("networkIP"), "name": f"nic{index}",
                "accessConfigs": [_drop_none({"natIp": a.get("natIP"),
                                              "networkTier": a.get("networkTier") or "PREMIUM"})
                                  for a in nic.get("accessConfigs") or []],
            }) for index, nic in enumerate(live.get("networkInterfaces") or [])],
            "metadata": {i["key"]: i.get("value", "")
                         for i in (live.get("metadata") or {}).get("items") or []},
            "labels": dict(live.get("labels") or {}),
            "tags": list((live.get("tags") or {}).get("items") or []) or None,
            "serviceAccount": ({"email": live["serviceAccounts"][0].get("email"),
                                "scopes": live["serviceAccounts"][0].get("scopes") or []}
                               if live.get("serviceAccounts") else None),
            "scheduling": _gce_scheduling(live.get("scheduling") or {}),
            "guestAccelerators": [{"type": _short(g["acceleratorType"]),
                                   "count": g["acceleratorCount"]}
                                  for g in live.get("guestAccelerators") or []] or None,
        })
        outputs = self._outputs(inputs, live)
        outputs["metadata"] = inputs["metadata"]
        return outputs["id"], inputs, outputs

    def update(self, resource_id: str, olds: dict[str, Any], news: dict[str, Any],
               state: dict[str, Any]) -> Outputs:
        live = self.apis.call("compute", "GET", resource_id)
        project = self.project(news)
        if _short(olds.get("machineType")) != _short(news.get("machineType")):
            # allow_stopping_for_update: stop, setMachineType, start, as the Terraform resource.
            for action, body in (("stop", None),
                                 ("setMachineType", {"machineType": f"zones/{self.zone(news)}/"
                                                     f"machineTypes/{_short(news['machineType'])}"}),
                                 ("start", None)):
                operation = self.apis.call("compute", "POST", f"{resource_id}/{action}", body)
                self.apis.wait_compute(operation, project)
        if (olds.get("metadata") or {}) != (news.get("metadata") or {}):
            operation = self.apis.call("compute", "POST", f"{resource_id}/setMetadata", {
                "fingerprint": live["metadata"]["fingerprint"],
                "items": _items(news.get("metadata"))})
            self.apis.wait_compute(operation, project)
        if (olds.get("labels") or {}) != (news.get("labels") or {}):
            operation = self.apis.call("compute", "POST", f"{resource_id}/setLabels", {
                "labelFingerprint": live["labelFingerprint"], "labels": news.get("labels") or {}})
            self.apis.wait_compute(operation, project)
        return self._outputs(news, self.apis.call("compute", "GET", resource_id))

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        try:
            operation = self.apis.call("compute", "DELETE", resource_id)
        except ApiError as error:
            if error.status == 404:
                return
            raise
        self.apis.wait_compute(operation, self.project(state))


class V2Vm(Handler):
    """google_tpu_v2_vm."""

    token = "gcp:tpu/v2Vm:V2Vm"
    computed = ("id", "state", "health", "networkEndpoints", "apiVersion", "effectiveLabels",
                "symptoms", "queuedResource", "multisliceNode")

    def _path(self, inputs: dict[str, Any]) -> str:
        return f"projects/{self.project(inputs)}/locations/{self.zone(inputs)}/nodes"

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        account = inputs.get("serviceAccount")
        body = _drop_none({
            "acceleratorType": inputs.get("acceleratorType"),
            "acceleratorConfig": inputs.get("acceleratorConfig"),
            "runtimeVersion": inputs["runtimeVersion"],
            "networkConfig": inputs.get("networkConfig"),
            "serviceAccount": ({"email": account.get("email"), "scope": account.get("scopes")}
                               if account else None),
            "schedulingConfig": inputs.get("schedulingConfig"),
            "dataDisks": inputs.get("dataDisks"),
            "labels": inputs.get("labels"), "metadata": inputs.get("metadata"),
            "tags": inputs.get("tags"), "description": inputs.get("description"),
            "cidrBlock": inputs.get("cidrBlock"),
            "shieldedInstanceConfig": inputs.get("shieldedInstanceConfig"),
        })
        operation = self.apis.call("tpuV2", "POST", self._path(inputs), body,
                                   {"nodeId": inputs["name"]})
        self.apis.wait_tpu(operation)
        resource_id = f"{self._path(inputs)}/{inputs['name']}"
        return resource_id, self._outputs(inputs, self.apis.call("tpuV2", "GET", resource_id))

    def _outputs(self, inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        return {
            **inputs,
            "project": self.project(inputs), "zone": self.zone(inputs),
            "id": f"{self._path(inputs)}/{inputs['name']}",
            "state": live.get("state"), "health": live.get("health", "HEALTHY"),
            "apiVersion": "V2", "effectiveLabels": live.get("labels") or {},
            "networkEndpoints": [{
                "ipAddress": end.get("ipAddress"), "port": end.get("port"),
                "accessConfigs": ([{"externalIp": end["accessConfig"]["externalIp"]}]
                                  if end.get("accessConfig") else []),
            } for end in live.get("networkEndpoints") or []],
        }

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("tpuV2", resource_id)
        return None if live is None else self._outputs(state, live)

    def update(self, resource_id: str, olds: dict[str, Any], news: dict[str, Any],
               state: dict[str, Any]) -> Outputs:
        # The Terraform resource patches labels, metadata, tags and description (nodes.patch).
        mask = [key for key in ("labels", "metadata", "tags", "description")
                if olds.get(key) != news.get(key)]
        if mask:
            operation = self.apis.call("tpuV2", "PATCH", resource_id,
                                       {key: news.get(key) for key in mask},
                                       {"updateMask": ",".join(mask)})
            self.apis.wait_tpu(operation)
        return self._outputs(news, self.apis.call("tpuV2", "GET", resource_id))

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        try:
            self.apis.wait_tpu(self.apis.call("tpuV2", "DELETE", resource_id))
        except ApiError as error:
            if error.status != 404:
                raise


class Firewall(Handler):
    """google_compute_firewall."""

    token = "gcp:compute/firewall:Firewall"
    computed = ("id", "selfLink", "creationTimestamp")

    def _body(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return _drop_none({
            "name": inputs["name"], "network": inputs["network"],
            "description": inputs.get("description"), "direction": inputs.get("direction"),
            "priority": inputs.get("priority", 1000), "sourceTags": inputs.get("sourceTags"),
            "targetTags": inputs.get("targetTags"), "sourceRanges": inputs.get("sourceRanges"),
            "allowed": [_drop_none({"IPProtocol": a["protocol"], "ports": a.get("ports")})
                        for a in inputs.get("allows") or []],
        })

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        path = f"projects/{self.project(inputs)}/global/firewalls"
        operation = self.apis.call("compute", "POST", path, self._body(inputs))
        self.apis.wait_compute(operation, self.project(inputs))
        live = self.apis.call("compute", "GET", f"{path}/{inputs['name']}")
        return f"{path}/{inputs['name']}", self._outputs(inputs, live)

    def _outputs(self, inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        return {**inputs, "project": self.project(inputs), "priority": live.get("priority"),
                "id": f"projects/{self.project(inputs)}/global/firewalls/{live['name']}",
                "selfLink": live["selfLink"], "creationTimestamp": live["creationTimestamp"]}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("compute", resource_id)
        return None if live is None else self._outputs(state, live)

    def update(self, resource_id: str, olds: dict[str, Any], news: dict[str, Any],
               state: dict[str, Any]) -> Outputs:
        operation = self.apis.call("compute", "PATCH", resource_id, self._body(news))
        self.apis.wait_compute(operation, self.project(news))
        return self._outputs(news, self.apis.call("compute", "GET", resource_id))

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        self.apis.wait_compute(self.apis.call("compute", "DELETE", resource_id),
                               self.project(state))


class Disk(Handler):
    """google_compute_disk."""

    token = "gcp:compute/disk:Disk"
    computed = ("id", "selfLink", "size")

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        zone = self.zone(inputs)
        path = f"projects/{self.project(inputs)}/zones/{zone}/disks"
        body = _drop_none({
            "name": inputs["name"], "sizeGb": inputs.get("size"),
            "type": f"zones/{zone}/diskTypes/{_short(inputs.get('type') or 'pd-standard')}",
            "sourceImage": inputs.get("image"), "labels": inputs.get("labels"),
            "description": inputs.get("description"),
        })
        self.apis.wait_compute(self.apis.call("compute", "POST", path, body),
                               self.project(inputs))
        live = self.apis.call("compute", "GET", f"{path}/{inputs['name']}")
        return f"{path}/{inputs['name']}", {**inputs, "id": f"{path}/{inputs['name']}",
                                            "selfLink": live["selfLink"],
                                            "size": inputs.get("size", 10)}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        return None if self.apis.get_or_none("compute", resource_id) is None else state

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        self.apis.wait_compute(self.apis.call("compute", "DELETE", resource_id),
                               self.project(state))


class Account(Handler):
    """google_service_account (create_ignore_already_exists adopts an existing one)."""

    token = "gcp:serviceaccount/account:Account"
    computed = ("id", "email", "name", "uniqueId", "member")

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        project = self.project(inputs)
        try:
            live = self.apis.call("iam", "POST", f"projects/{project}/serviceAccounts", {
                "accountId": inputs["accountId"],
                "serviceAccount": _drop_none({"displayName": inputs.get("displayName"),
                                              "description": inputs.get("description")})})
        except ApiError as error:
            if error.status != 409 or not inputs.get("createIgnoreAlreadyExists"):
                raise
            email = f"{inputs['accountId']}@{project}.iam.gserviceaccount.com"
            live = self.apis.call("iam", "GET", f"projects/{project}/serviceAccounts/{email}")
        return f"projects/{project}/serviceAccounts/{live['email']}", self._outputs(inputs, live)

    def _outputs(self, inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        return {**inputs, "project": self.project(inputs),
                "id": f"projects/{self.project(inputs)}/serviceAccounts/{live['email']}",
                "email": live["email"], "name": live["name"], "uniqueId": live["uniqueId"],
                "member": f"serviceAccount:{live['email']}"}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("iam", resource_id)
        return None if live is None else self._outputs(state, live)

    def imported(self, resource_id: str) -> tuple[str, dict[str, Any], Outputs] | None:
        """resource_google_service_account.go's importer (`projects/{project}/serviceAccounts/
        {email}`): account_id, display_name, description and project from the account."""
        live = self.apis.get_or_none("iam", resource_id)
        if live is None:
            return None
        inputs = _drop_none({"accountId": live["email"].split("@")[0],
                             "project": resource_id.split("/")[1],
                             "displayName": live.get("displayName") or None,
                             "description": live.get("description") or None})
        return resource_id, inputs, self._outputs(inputs, live)

    def update(self, resource_id: str, olds: dict[str, Any], news: dict[str, Any],
               state: dict[str, Any]) -> Outputs:
        live = self.apis.call("iam", "PATCH", resource_id, {
            "serviceAccount": _drop_none({"displayName": news.get("displayName"),
                                          "description": news.get("description")}),
            "updateMask": "displayName,description"})
        return self._outputs(news, live)

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        self.apis.call("iam", "DELETE", resource_id)


class PolicyMember(Handler):
    """One (role, member) pair in an IAM policy: read-modify-write with the policy's etag,
    one writer per policy at a time (the Terraform provider's IAM mutex, keyed by the policy's
    resource) and again on a concurrent change (409 or 412: tpgresource.IsConflictError), as
    tpgiamresource does."""

    computed = ("id", "etag")
    api = "resourceManager"
    _locks: dict[str, threading.Lock] = {}
    _locks_guard = threading.Lock()

    def policy_path(self, inputs: dict[str, Any]) -> str:
        raise NotImplementedError

    def _policy(self, inputs: dict[str, Any]) -> dict[str, Any]:
        path = self.policy_path(inputs)
        if self.api == "secretManager":
            return self.apis.call(self.api, "GET", f"{path}:getIamPolicy")
        return self.apis.call(self.api, "POST", f"{path}:getIamPolicy", {})

    def _set(self, inputs: dict[str, Any], add: bool) -> dict[str, Any]:
        path = self.policy_path(inputs)
        with self._locks_guard:
            lock = self._locks.setdefault(path, threading.Lock())
        with lock:
            for _ in range(POLICY_ATTEMPTS - 1):
                try:
                    return self._write(inputs, add)
                except ApiError as error:
                    if error.status not in (409, 412):
                        raise
            return self._write(inputs, add)

    def _write(self, inputs: dict[str, Any], add: bool) -> dict[str, Any]:
        policy = self._policy(inputs)
        bindings = policy.setdefault("bindings", [])
        binding = next((b for b in bindings if b["role"] == inputs["role"]), None)
        if binding is None:
            binding = {"role": inputs["role"], "members": []}
            bindings.append(binding)
        members = [m for m in binding["members"] if m != inputs["member"]]
        binding["members"] = [*members, inputs["member"]] if add else members
        policy["bindings"] = [b for b in bindings if b["members"]]
        return self._store(inputs, policy)

    def _store(self, inputs: dict[str, Any], policy: dict[str, Any]) -> dict[str, Any]:
        return self.apis.call(self.api, "POST", f"{self.policy_path(inputs)}:setIamPolicy",
                              {"policy": policy})

    def member_id(self, inputs: dict[str, Any]) -> str:
        return f"{self.policy_path(inputs)}/{inputs['role']}/{inputs['member']}"

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        policy = self._set(inputs, add=True)
        return self.member_id(inputs), {**inputs, "id": self.member_id(inputs),
                                        "etag": policy["etag"]}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        policy = self._policy(state)
        held = any(b["role"] == state["role"] and state["member"] in b["members"]
                   for b in policy.get("bindings", []))
        return {**state, "etag": policy["etag"]} if held else None

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        self._set(state, add=False)


class ProjectIamMember(PolicyMember):
    """google_project_iam_member (id `{project}/{role}/{member}`)."""

    token = "gcp:projects/iAMMember:IAMMember"

    def imported(self, resource_id: str) -> tuple[str, dict[str, Any], Outputs] | None:
        """tpgiamresource's member importer: the import id is space-delimited, `{project}
        {role} {member}` (pulumi-gcp's docs, "Import" of gcp.projects.IAMMember); the member
        must hold the role."""
        parts = resource_id.split(" ")
        if len(parts) != 3:
            raise ApiError(400, f"wrong number of parts to Member id {parts}; expected "
                                "'resource_name role member'.")
        inputs = {"project": parts[0], "role": parts[1], "member": parts[2]}
        held = self.read(resource_id, inputs)
        if held is None:
            return None
        return self.member_id(inputs), inputs, {**held, "id": self.member_id(inputs)}

    def policy_path(self, inputs: dict[str, Any]) -> str:
        return f"projects/{self.project(inputs)}"

    def member_id(self, inputs: dict[str, Any]) -> str:
        return f"{self.project(inputs)}/{inputs['role']}/{inputs['member']}"


class SecretIamMember(PolicyMember):
    """google_secret_manager_secret_iam_member."""

    token = "gcp:secretmanager/secretIamMember:SecretIamMember"
    api = "secretManager"

    def policy_path(self, inputs: dict[str, Any]) -> str:
        secret = str(inputs["secretId"]).rsplit("/", 1)[-1]
        return f"projects/{self.project(inputs)}/secrets/{secret}"


class AccountIamMember(PolicyMember):
    """google_service_account_iam_member (iam_service_account.go: the policy of the account
    `service_account_id` names, `projects/{project}/serviceAccounts/{email}`)."""

    token = "gcp:serviceaccount/iAMMember:IAMMember"
    api = "iam"

    def policy_path(self, inputs: dict[str, Any]) -> str:
        return str(inputs["serviceAccountId"])


class ProjectService(Handler):
    """google_project_service; with disable_on_destroy false, delete only forgets it."""

    token = "gcp:projects/service:Service"

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        project = self.project(inputs)
        self.apis.call("serviceUsage", "POST",
                       f"projects/{project}/services/{inputs['service']}:enable", {})
        resource_id = f"{project}/{inputs['service']}"
        return resource_id, {**inputs, "project": project, "id": resource_id}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.call("serviceUsage", "GET", f"projects/{self.project(state)}/"
                              f"services/{state['service']}")
        return state if live.get("state") == "ENABLED" else None

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        if state.get("disableOnDestroy", True):
            raise ApiError(501, "the stand-in does not disable services")


class Secret(Handler):
    """google_secret_manager_secret."""

    token = "gcp:secretmanager/secret:Secret"
    computed = ("id", "name", "createTime", "effectiveLabels")

    def _path(self, inputs: dict[str, Any]) -> str:
        return f"projects/{self.project(inputs)}/secrets"

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        replication = inputs["replication"]
        body = _drop_none({
            "replication": ({"automatic": {}} if "auto" in replication
                            else {"userManaged": replication.get("userManaged")}),
            "labels": inputs.get("labels")})
        live = self.apis.call("secretManager", "POST", self._path(inputs), body,
                              {"secretId": inputs["secretId"]})
        resource_id = f"{self._path(inputs)}/{inputs['secretId']}"
        return resource_id, self._outputs(inputs, live)

    def _outputs(self, inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        return {**inputs, "project": self.project(inputs),
                "id": f"{self._path(inputs)}/{inputs['secretId']}", "name": live["name"],
                "createTime": live["createTime"], "effectiveLabels": live.get("labels") or {}}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("secretManager", resource_id)
        return None if live is None else self._outputs(state, live)

    def update(self, resource_id: str, olds: dict[str, Any], news: dict[str, Any],
               state: dict[str, Any]) -> Outputs:
        live = self.apis.call("secretManager", "PATCH", resource_id,
                              {"labels": news.get("labels") or {}}, {"updateMask": "labels"})
        return self._outputs(news, live)

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        self.apis.call("secretManager", "DELETE", resource_id)


class SecretVersion(Handler):
    """google_secret_manager_secret_version (the id is the version's resource name)."""

    token = "gcp:secretmanager/secretVersion:SecretVersion"
    computed = ("id", "name", "version", "createTime", "enabled")

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        data = str(inputs["secretData"])
        encoded = (data if inputs.get("isSecretDataBase64")
                   else base64.b64encode(data.encode()).decode("ascii"))
        live = self.apis.call("secretManager", "POST", f"{inputs['secret']}:addVersion",
                              {"payload": {"data": encoded}})
        return live["name"], self._outputs(inputs, live)

    @staticmethod
    def _outputs(inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        return {**inputs, "id": live["name"], "name": live["name"],
                "version": live["name"].rsplit("/", 1)[-1], "createTime": live["createTime"],
                "enabled": live.get("state") == "ENABLED"}

    def _path(self, resource_id: str, state: dict[str, Any]) -> str:
        # The name carries the project number; the API is addressed by the secret's id path.
        return f"{state['secret']}/versions/{resource_id.rsplit('/', 1)[-1]}"

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("secretManager", self._path(resource_id, state))
        return None if live is None or live.get("state") == "DESTROYED" else \
            self._outputs(state, live)

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        self.apis.call("secretManager", "POST", f"{self._path(resource_id, state)}:destroy", {})


HANDLERS: dict[str, type[Handler]] = {
    handler.token: handler
    for handler in (Instance, V2Vm, Firewall, Disk, Account, ProjectIamMember, SecretIamMember,
                    AccountIamMember, ProjectService, Secret, SecretVersion)
}


def invoke(apis: Apis, defaults: dict[str, Any], token: str, args: dict[str, Any]) -> Any:
    """The data sources the program reads: getProject, getSubnetworks and getSubnetwork."""
    project = str(args.get("projectId") or args.get("project") or defaults.get("project"))
    if token == "gcp:organizations/getProject:getProject":
        live = apis.call("resourceManager", "GET", f"projects/{project}")
        return {"id": f"projects/{project}", "projectId": project, "name": live["name"],
                "number": live["projectNumber"], "orgId": "", "folderId": "",
                "billingAccount": "", "autoCreateNetwork": True, "deletionPolicy": "PREVENT",
                "labels": copy.deepcopy(live.get("labels") or {}), "effectiveLabels": {},
                "pulumiLabels": {}, "tags": {}}
    if token == "gcp:compute/getSubnetworks:getSubnetworks":
        region = str(args.get("region") or defaults.get("region"))
        live = apis.call("compute", "GET", f"projects/{project}/regions/{region}/subnetworks")
        return {"id": f"projects/{project}/regions/{region}/subnetworks", "project": project,
                "region": region, "subnetworks": [{
                    "description": s.get("description", ""), "ipCidrRange": s["ipCidrRange"],
                    "name": s["name"], "network": s["network"],
                    "networkName": _short(s["network"]), "networkSelfLink": s["network"],
                    "privateIpGoogleAccess": s.get("privateIpGoogleAccess", False),
                    "project": project, "region": region, "selfLink": s["selfLink"],
                } for s in live.get("items", [])]}
    if token == "gcp:compute/getSubnetwork:getSubnetwork":
        return _subnetwork(apis, project, defaults, args)
    raise ApiError(501, f"the stand-in gcp provider has no function {token}")


def _subnetwork(apis: Apis, project: str, defaults: dict[str, Any],
                args: dict[str, Any]) -> dict[str, Any]:
    """data.google_compute_subnetwork: by `selfLink` (a full or partial URL: "If self_link is
    specified, name, project, and region are ignored") or by name, project and region."""
    link = str(args.get("selfLink") or "")
    if link:
        parts = link.split("/")
        if "regions" not in parts[:-1] or "subnetworks" not in parts[:-1]:
            raise ApiError(400, f"Invalid subnetwork self_link {link!r}")
        region, name = parts[parts.index("regions") + 1], parts[-1]
        if "projects" in parts[:-1]:
            project = parts[parts.index("projects") + 1]
    else:
        region = str(args.get("region") or defaults.get("region"))
        name = str(args.get("name"))
    live = apis.call("compute", "GET", f"projects/{project}/regions/{region}/subnetworks/{name}")
    return {"id": f"projects/{project}/regions/{region}/subnetworks/{name}", "project": project,
            "region": region, "name": name, "selfLink": live["selfLink"],
            "network": live["network"], "ipCidrRange": live["ipCidrRange"],
            "description": live.get("description", ""),
            "gatewayAddress": live.get("gatewayAddress", ""),
            "privateIpGoogleAccess": live.get("privateIpGoogleAccess", False),
            "secondaryIpRanges": [], "internalIpv6Prefix": "", "subnetworkId": 0}
