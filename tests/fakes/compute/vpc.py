"""VPC networks and subnetworks (Compute v1 `networks` and `subnetworks`): every project's
`default` network in auto mode with a `default` subnet in every region (the catalogue's, as a
new project has them), and the networks and subnets a caller creates.

What Compute refuses here, each from compute.v1's discovery document (field descriptions, as
googleapiclient ships it) or the VPC guide:
- a network or subnet name taken: 409 alreadyExists, as every Compute insert;
- a subnet of a network that does not exist: 404 notFound;
- a subnet range overlapping another subnet's of the same network: "Ranges must be unique and
  non-overlapping within a network" (Subnetwork.ipCidrRange);
- an instance interface naming a network or subnet that does not exist ("The referenced ...
  resource cannot be found"), a subnet of another region than the instance's ("the subnet must
  be in the same region as the instance",
  https://cloud.google.com/vpc/docs/create-use-multiple-interfaces#specifications), a subnet of
  another network than the one named, or no subnet on a custom-mode network ("If the network is
  in custom subnet mode, specifying the subnetwork is required", NetworkInterface.subnetwork);
- deleting a network while subnets, firewall rules, routers or instances use it, or a subnet
  while instances use it: 400 resourceInUseByAnotherResource ("you must first delete ... all
  resources that reference the network",
  https://cloud.google.com/vpc/docs/create-modify-vpc-networks#deleting_a_network, and "a subnet
  ... no resources use", #deleting_a_subnet).
"""

from __future__ import annotations

import copy
import ipaddress
import re
from typing import Any

from tests.fakes.compute.catalogue import Catalogue
from tests.fakes.compute.errors import COMPUTE, ApiError

_NETWORK = re.compile(r"^(?:.*/)?(?:projects/(?P<project>[^/]+)/)?global/networks/(?P<name>[^/]+)$")
_SUBNET = re.compile(r"^(?:.*/)?(?:projects/(?P<project>[^/]+)/)?regions/(?P<region>[^/]+)/"
                     r"subnetworks/(?P<name>[^/]+)$")


def network_key(project: str, reference: str) -> tuple[str, str] | None:
    """(project, name) of a network named by a full or partial URL; None for another form."""
    if reference and "/" not in reference:  # a name, as the Terraform provider allows
        return project, reference
    found = _NETWORK.match(reference)
    return None if found is None else (found["project"] or project, found["name"])


def subnetwork_key(project: str, reference: str) -> tuple[str, str, str] | None:
    found = _SUBNET.match(reference)
    return None if found is None else (found["project"] or project, found["region"],
                                       found["name"])


def _in_use(kind: str, path: str, user: str) -> ApiError:
    return ApiError(400, f"The {kind} resource '{path}' is already being used by '{user}'",
                    "resourceInUseByAnotherResource")


def _invalid(index: int, field: str, value: str, why: str) -> ApiError:
    return ApiError(400, f"Invalid value for field 'resource.networkInterfaces[{index}]"
                         f"{field}': '{value}'. {why}", "invalid")


class Vpc:
    """The project's networks and subnets; the caller holds the cloud's lock."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.catalogue = catalogue
        self.networks: dict[tuple[str, str], dict[str, Any]] = {}
        self.subnetworks: dict[tuple[str, str, str], dict[str, Any]] = {}

    # -------------------------------------------------------------- reads

    def network(self, project: str, name: str) -> dict[str, Any] | None:
        if name == "default":
            return {"kind": "compute#network", "name": "default", "autoCreateSubnetworks": True,
                    "selfLink": f"{COMPUTE}/projects/{project}/global/networks/default"}
        found = self.networks.get((project, name))
        return copy.deepcopy(found) if found is not None else None

    def subnetwork(self, project: str, region: str, name: str) -> dict[str, Any] | None:
        found = self.subnetworks.get((project, region, name))
        if found is not None:
            return copy.deepcopy(found)
        return self.catalogue.subnetwork_json(project, region, name)

    def region_subnetworks(self, project: str, region: str) -> list[dict[str, Any]]:
        default = self.catalogue.subnetwork_json(project, region, "default")
        return [*([default] if default else []),
                *[copy.deepcopy(s) for (p, r, _), s in sorted(self.subnetworks.items())
                  if (p, r) == (project, region)]]

    # -------------------------------------------------------------- writes

    def insert_network(self, project: str, body: dict[str, Any]) -> str:
        name = str(body.get("name") or "")
        link = f"{COMPUTE}/projects/{project}/global/networks/{name}"
        if not name or self.network(project, name) is not None:
            raise ApiError(409, f"The resource 'projects/{project}/global/networks/{name}' "
                                "already exists", "alreadyExists")
        self.networks[(project, name)] = {
            **copy.deepcopy(body), "kind": "compute#network", "selfLink": link,
            "id": str(abs(hash(link)) % 10**18), "autoCreateSubnetworks":
                bool(body.get("autoCreateSubnetworks")), "subnetworks": []}
        return link

    def insert_subnetwork(self, project: str, region: str, body: dict[str, Any]) -> str:
        name = str(body.get("name") or "")
        path = f"projects/{project}/regions/{region}/subnetworks/{name}"
        if not name or self.subnetwork(project, region, name) is not None:
            raise ApiError(409, f"The resource '{path}' already exists", "alreadyExists")
        key = network_key(project, str(body.get("network") or ""))
        network = self.network(*key) if key else None
        if key is None or network is None:
            raise ApiError(404, f"The resource '{body.get('network')}' was not found",
                           "notFound")
        try:
            cidr = ipaddress.ip_network(str(body.get("ipCidrRange")))
        except ValueError:
            raise ApiError(400, f"Invalid value for field 'resource.ipCidrRange': "
                                f"'{body.get('ipCidrRange')}'. Invalid IPCidrRange.") from None
        for (_, r, other), subnet in self.subnetworks.items():
            if subnet["network"] == network["selfLink"] and cidr.overlaps(
                    ipaddress.ip_network(subnet["ipCidrRange"])):
                raise ApiError(400, f"Invalid IPCidrRange: {cidr} conflicts with existing "
                                    f"subnetwork '{other}' in region '{r}'.", "invalid")
        link = f"{COMPUTE}/{path}"
        self.subnetworks[(project, region, name)] = {
            **copy.deepcopy(body), "kind": "compute#subnetwork", "network": network["selfLink"],
            "region": f"{COMPUTE}/projects/{project}/regions/{region}", "selfLink": link,
            "id": str(abs(hash(link)) % 10**18), "ipCidrRange": str(cidr),
            "privateIpGoogleAccess": bool(body.get("privateIpGoogleAccess"))}
        self.networks[key]["subnetworks"].append(link)
        return link

    def delete_network(self, project: str, name: str, users: list[tuple[str, str]]) -> str:
        """`users`: (self-link of what names a network, the network it names) of firewall
        rules, routers and instance interfaces."""
        path = f"projects/{project}/global/networks/{name}"
        network = self.networks.get((project, name))
        if network is None:
            raise ApiError(404, f"The resource '{path}' was not found", "notFound")
        subnets = [s["selfLink"] for s in self.subnetworks.values()
                   if s["network"] == network["selfLink"]]
        using = subnets + [user for user, named in users
                           if network_key(project, named) == (project, name)]
        if using:
            raise _in_use("network", path, using[0])
        del self.networks[(project, name)]
        return network["selfLink"]

    def delete_subnetwork(self, project: str, region: str, name: str,
                          users: list[tuple[str, str]]) -> str:
        """`users`: (instance self-link, the subnet an interface of it names)."""
        path = f"projects/{project}/regions/{region}/subnetworks/{name}"
        subnet = self.subnetworks.get((project, region, name))
        if subnet is None:
            raise ApiError(404, f"The resource '{path}' was not found", "notFound")
        using = [user for user, named in users
                 if subnetwork_key(project, named) == (project, region, name)]
        if using:
            raise _in_use("subnetwork", path, using[0])
        del self.subnetworks[(project, region, name)]
        key = network_key(project, subnet["network"])
        if key in self.networks:
            self.networks[key]["subnetworks"].remove(subnet["selfLink"])
        return subnet["selfLink"]

    # -------------------------------------------------------------- instances

    def check_network(self, project: str, reference: str) -> None:
        """A firewall rule's or a router's network must exist (404 notFound)."""
        key = network_key(project, reference)
        if key is None or self.network(*key) is None:
            raise ApiError(404, f"The resource '{reference}' was not found", "notFound")

    def check_interfaces(self, project: str, region: str,
                         interfaces: list[dict[str, Any]]) -> None:
        """What instances.insert refuses in `networkInterfaces` (the module's list)."""
        for index, nic in enumerate(interfaces):
            network = subnet = None
            if nic.get("network"):
                key = network_key(project, str(nic["network"]))
                network = self.network(*key) if key else None
                if network is None:
                    raise _invalid(index, ".network", nic["network"],
                                   "The referenced network resource cannot be found.")
            if nic.get("subnetwork"):
                key3 = subnetwork_key(project, str(nic["subnetwork"]))
                if key3 is None and "/" not in str(nic["subnetwork"]):
                    key3 = (project, region, str(nic["subnetwork"]))
                subnet = self.subnetwork(*key3) if key3 else None
                if subnet is None:
                    raise _invalid(index, ".subnetwork", nic["subnetwork"],
                                   "The referenced subnetwork resource cannot be found.")
                if key3 and key3[1] != region:
                    raise _invalid(index, ".subnetwork", nic["subnetwork"], "Subnetwork must "
                                   f"be in the same region as the instance ({region}).")
                if network is not None and subnet["network"] != network["selfLink"]:
                    raise _invalid(index, ".subnetwork", nic["subnetwork"],
                                   f"Subnetwork does not belong to network "
                                   f"'{network['selfLink']}'.")
            elif network is not None and not network.get("autoCreateSubnetworks"):
                raise _invalid(index, "", "", "Subnetwork should be specified for custom "
                                              "subnetmode network")
