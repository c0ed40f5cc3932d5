"""VPC networks and subnetworks, Cloud Router and Cloud NAT.

google_compute_network (id `projects/{project}/global/networks/{name}`; `auto_create_subnetworks`
defaults to true, the Terraform schema's Default) and google_compute_subnetwork (id
`projects/{project}/regions/{region}/subnetworks/{name}`), as
google/services/compute/resource_compute_network.go and resource_compute_subnetwork.go of
hashicorp/terraform-provider-google (at 017d2f5814 and 0110d02a6c) create and read them;
google_compute_router (id
`projects/{project}/regions/{region}/routers/{name}`) and google_compute_router_nat (id
`{project}/{region}/{router}/{name}`). A NAT is no API resource of its own: it is an element of
its router's `nats`, read with routers.get and written with routers.patch, one writer per
router at a time (the Terraform resource's mutex `router/{region}/{router}`).
"""

from __future__ import annotations

import threading
from typing import Any

from tests.fakes.standin_gcp.api import ApiError
from tests.fakes.standin_gcp.resources import Handler, Outputs, _drop_none, _short


class Network(Handler):
    """google_compute_network."""

    token = "gcp:compute/network:Network"
    computed = ("id", "selfLink", "networkId", "gatewayIpv4", "project", "name",
                "autoCreateSubnetworks")

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        project = self.project(inputs)
        body = _drop_none({"name": inputs["name"], "description": inputs.get("description"),
                           "autoCreateSubnetworks": inputs.get("autoCreateSubnetworks", True),
                           "mtu": inputs.get("mtu")})
        self.apis.wait_compute(
            self.apis.call("compute", "POST", f"projects/{project}/global/networks", body),
            project)
        resource_id = f"projects/{project}/global/networks/{inputs['name']}"
        return resource_id, self._outputs(inputs, self.apis.call("compute", "GET", resource_id))

    def _outputs(self, inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        project = self.project(inputs)
        return {**inputs, "project": project, "name": live["name"],
                "id": f"projects/{project}/global/networks/{live['name']}",
                "selfLink": live["selfLink"], "networkId": live.get("id", ""),
                "gatewayIpv4": live.get("gatewayIPv4", ""),
                "autoCreateSubnetworks": bool(live.get("autoCreateSubnetworks"))}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("compute", resource_id)
        return None if live is None else self._outputs(state, live)

    def update(self, resource_id: str, olds: dict[str, Any], news: dict[str, Any],
               state: dict[str, Any]) -> Outputs:
        raise ApiError(501, "the stand-in updates no network in place (routing mode, MTU)")

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        self.apis.wait_compute(self.apis.call("compute", "DELETE", resource_id),
                               self.project(state))


class Subnetwork(Handler):
    """google_compute_subnetwork."""

    token = "gcp:compute/subnetwork:Subnetwork"
    computed = ("id", "selfLink", "gatewayAddress", "project", "region", "creationTimestamp",
                "privateIpGoogleAccess", "subnetworkId")

    def region(self, inputs: dict[str, Any]) -> str:
        return str(_short(inputs.get("region")) or self.defaults.get("region") or "")

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        project, region = self.project(inputs), self.region(inputs)
        path = f"projects/{project}/regions/{region}/subnetworks"
        body = _drop_none({
            "name": inputs["name"], "network": inputs["network"],
            "ipCidrRange": inputs["ipCidrRange"], "description": inputs.get("description"),
            "privateIpGoogleAccess": inputs.get("privateIpGoogleAccess"),
            "secondaryIpRanges": [{"rangeName": r["rangeName"], "ipCidrRange": r["ipCidrRange"]}
                                  for r in inputs.get("secondaryIpRanges") or []] or None})
        self.apis.wait_compute(self.apis.call("compute", "POST", path, body), project)
        resource_id = f"{path}/{inputs['name']}"
        return resource_id, self._outputs(inputs, self.apis.call("compute", "GET", resource_id))

    def _outputs(self, inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        project, region = self.project(inputs), self.region(inputs)
        return {**inputs, "project": project, "region": region,
                "id": f"projects/{project}/regions/{region}/subnetworks/{live['name']}",
                "selfLink": live["selfLink"], "subnetworkId": int(live.get("id") or 0),
                "gatewayAddress": live.get("gatewayAddress", ""),
                "creationTimestamp": live.get("creationTimestamp", ""),
                "privateIpGoogleAccess": bool(live.get("privateIpGoogleAccess"))}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("compute", resource_id)
        return None if live is None else self._outputs(state, live)

    def update(self, resource_id: str, olds: dict[str, Any], news: dict[str, Any],
               state: dict[str, Any]) -> Outputs:
        raise ApiError(501, "the stand-in updates no subnetwork in place (expandIpCidrRange, "
                            "logs, secondary ranges)")

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        self.apis.wait_compute(self.apis.call("compute", "DELETE", resource_id),
                               self.project(state))


class Router(Handler):
    """google_compute_router."""

    token = "gcp:compute/router:Router"
    computed = ("id", "selfLink", "creationTimestamp", "project", "region")

    def region(self, inputs: dict[str, Any]) -> str:
        return str(inputs.get("region") or self.defaults.get("region") or "")

    def _path(self, inputs: dict[str, Any]) -> str:
        return f"projects/{self.project(inputs)}/regions/{self.region(inputs)}/routers"

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        body = _drop_none({"name": inputs["name"], "network": inputs["network"],
                           "description": inputs.get("description"),
                           "bgp": inputs.get("bgp")})
        self.apis.wait_compute(self.apis.call("compute", "POST", self._path(inputs), body),
                               self.project(inputs))
        resource_id = f"{self._path(inputs)}/{inputs['name']}"
        return resource_id, self._outputs(inputs, self.apis.call("compute", "GET", resource_id))

    def _outputs(self, inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        return {**inputs, "project": self.project(inputs), "region": self.region(inputs),
                "id": f"{self._path(inputs)}/{live['name']}", "selfLink": live["selfLink"],
                "creationTimestamp": live["creationTimestamp"]}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("compute", resource_id)
        return None if live is None else self._outputs(state, live)

    def update(self, resource_id: str, olds: dict[str, Any], news: dict[str, Any],
               state: dict[str, Any]) -> Outputs:
        body = _drop_none({"description": news.get("description"), "bgp": news.get("bgp")})
        self.apis.wait_compute(self.apis.call("compute", "PATCH", resource_id, body),
                               self.project(news))
        return self._outputs(news, self.apis.call("compute", "GET", resource_id))

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        self.apis.wait_compute(self.apis.call("compute", "DELETE", resource_id),
                               self.project(state))


class RouterNat(Router):
    """google_compute_router_nat: its router's `nats` element of the same name."""

    token = "gcp:compute/routerNat:RouterNat"
    computed = ("id", "project", "region")
    _locks: dict[str, threading.Lock] = {}
    _locks_guard = threading.Lock()

    def _router(self, inputs: dict[str, Any]) -> str:
        return f"{self._path(inputs)}/{_short(inputs['router'])}"

    def _nat(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return _drop_none({
            "name": inputs["name"],
            "natIpAllocateOption": inputs.get("natIpAllocateOption"),
            "sourceSubnetworkIpRangesToNat": inputs.get("sourceSubnetworkIpRangesToNat"),
            "natIps": inputs.get("natIps"),
            "subnetworks": [_drop_none({
                "name": s.get("name"),
                "sourceIpRangesToNat": s.get("sourceIpRangesToNats"),
                "secondaryIpRangeNames": s.get("secondaryIpRangeNames")})
                for s in inputs.get("subnetworks") or []] or None,
            "logConfig": inputs.get("logConfig"),
            "minPortsPerVm": inputs.get("minPortsPerVm"),
        })

    def _write(self, inputs: dict[str, Any], nat: dict[str, Any] | None) -> None:
        """The router's `nats` with this one put (or, for None, taken out)."""
        router = self._router(inputs)
        with self._locks_guard:
            lock = self._locks.setdefault(router, threading.Lock())
        with lock:
            live = self.apis.call("compute", "GET", router)
            nats = [n for n in live.get("nats") or [] if n.get("name") != inputs["name"]]
            nats += [nat] if nat is not None else []
            self.apis.wait_compute(
                self.apis.call("compute", "PATCH", router, {"nats": nats}),
                self.project(inputs))

    def _nat_id(self, inputs: dict[str, Any]) -> str:
        return (f"{self.project(inputs)}/{self.region(inputs)}/{_short(inputs['router'])}/"
                f"{inputs['name']}")

    def create(self, inputs: dict[str, Any]) -> tuple[str, Outputs]:
        self._write(inputs, self._nat(inputs))
        return self._nat_id(inputs), self._outputs(inputs, {})

    def _outputs(self, inputs: dict[str, Any], live: dict[str, Any]) -> Outputs:
        return {**inputs, "project": self.project(inputs), "region": self.region(inputs),
                "id": self._nat_id(inputs)}

    def read(self, resource_id: str, state: dict[str, Any]) -> Outputs | None:
        live = self.apis.get_or_none("compute", self._router(state))
        held = live is not None and any(n.get("name") == state["name"]
                                        for n in live.get("nats") or [])
        return self._outputs(state, {}) if held else None

    def update(self, resource_id: str, olds: dict[str, Any], news: dict[str, Any],
               state: dict[str, Any]) -> Outputs:
        self._write(news, self._nat(news))
        return self._outputs(news, {})

    def delete(self, resource_id: str, state: dict[str, Any]) -> None:
        self._write(state, None)


HANDLERS: dict[str, type[Handler]] = {
    handler.token: handler for handler in (Network, Subnetwork, Router, RouterNat)}
