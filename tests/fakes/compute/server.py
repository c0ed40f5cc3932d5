"""HTTP front of the fake: the slice of the Compute v1 and TPU v2 REST APIs WorkerGroup uses,
Service Usage v1beta1's quota listing, and the Cloud Storage JSON API's buckets and objects
that nodes read their file_mounts and config from (tests/fakes/compute/storage.py).

Binds 127.0.0.1 on a free port; the real google-cloud-compute / google-cloud-tpu clients talk
to it with `api_endpoint="127.0.0.1:PORT"` over plain http.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.compute.access import (
    RULES,
    STORAGE_RULES,
    act_as_refusal,
    attached_accounts,
    authorize,
)
from tests.fakes.compute.cloud import ApiError, FakeCloud, Operation
from tests.fakes.compute.faults import Faults
from tests.fakes.compute.filters import FilterError, Predicate, compile_filter
from tests.fakes.compute.google_profile import (
    CloudProfile,
    RateLimiter,
    bulk_limit_error,
)
from tests.fakes.compute.identity import IDENTITIES, Identities, Token, granted
from tests.fakes.compute.listings import ROUTES as LISTING_ROUTES
from tests.fakes.compute.listings import Listings, list_page
from tests.fakes.compute.peers import peer_process
from tests.fakes.compute.platform import PROJECT_NUMBER, Platform
from tests.fakes.compute.platform import ROUTES as PLATFORM_ROUTES
from tests.fakes.compute.queued import QueuedResources
from tests.fakes.compute.storage import FakeStorage

_COMPUTE = r"/compute/v1/projects/(?P<project>[^/]+)"
_TPU = r"/v2/projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)"

Handler = Callable[["FakeComputeServer", dict[str, str], dict[str, str], Any], Any]
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (verb, re.compile(pattern + "$"), method)
    for verb, pattern, method in [
        ("GET", _COMPUTE + r"/aggregated/instances", "aggregatedList"),
        ("POST", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances/bulkInsert", "bulkInsert"),
        ("GET", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances", "list"),
        ("POST", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances", "insert"),
        ("GET", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)", "get"),
        ("DELETE", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)", "delete"),
        ("POST", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)/stop", "stop"),
        ("POST", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)/start", "start"),
        ("POST", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)/setLabels",
         "setLabels"),
        ("POST", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)/setMetadata",
         "setMetadata"),
        ("POST", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)/setMachineType",
         "setMachineType"),
        ("GET", _COMPUTE + r"/zones/(?P<zone>[^/]+)/operations/(?P<name>[^/]+)",
         "operations.get"),
        ("POST", _COMPUTE + r"/zones/(?P<zone>[^/]+)/operations/(?P<name>[^/]+)/wait", "wait"),
        ("GET", _COMPUTE + r"/zones/(?P<zone>[^/]+)/operations", "zoneOperations.list"),
        ("GET", _COMPUTE + r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)/getGuestAttributes",
         "getGuestAttributes"),
        ("POST", _TPU + r"/nodes", "tpu.create"),
        ("GET", _TPU + r"/nodes", "tpu.list"),
        ("GET", _TPU + r"/nodes/(?P<name>[^/:]+)", "tpu.get"),
        ("DELETE", _TPU + r"/nodes/(?P<name>[^/:]+)", "tpu.delete"),
        ("POST", _TPU + r"/nodes/(?P<name>[^/:]+):stop", "tpu.stop"),
        ("POST", _TPU + r"/nodes/(?P<name>[^/:]+):start", "tpu.start"),
        ("GET", _TPU + r"/operations/(?P<name>[^/]+)", "tpu.operations.get"),
    ]
]

# TPU queued resources: slices that wait for capacity (tests/fakes/compute/queued.py), and the
# node update that changes a queued slice's metadata and labels in place.
ROUTES += [
    (verb, re.compile(_TPU + pattern + "$"), method)
    for verb, pattern, method in [
        ("POST", r"/queuedResources", "tpu.queuedResources.create"),
        ("GET", r"/queuedResources", "tpu.queuedResources.list"),
        ("GET", r"/queuedResources/(?P<name>[^/:]+)", "tpu.queuedResources.get"),
        ("PATCH", r"/nodes/(?P<name>[^/:]+)", "tpu.patch"),
        ("POST", r"/nodes/(?P<name>[^/:]+):getGuestAttributes", "tpu.getGuestAttributes"),
        ("DELETE", r"/queuedResources/(?P<name>[^/:]+)", "tpu.queuedResources.delete"),
    ]
]

# What a capacity-aware caller reads first: the region's zones and quotas, and whether a zone
# offers a machine or accelerator type (tests/fakes/compute/catalogue.py).
ROUTES += [
    (verb, re.compile(_COMPUTE + pattern + "$"), method)
    for verb, pattern, method in [
        ("GET", r"/zones", "zones.list"),
        ("GET", r"/zones/(?P<zone>[^/]+)/machineTypes/(?P<name>[^/]+)", "machineTypes.get"),
        ("GET", r"/zones/(?P<zone>[^/]+)/acceleratorTypes/(?P<name>[^/]+)",
         "acceleratorTypes.get"),
        ("GET", r"/regions/(?P<region>[^/]+)", "regions.get"),
        ("GET", r"/zones/(?P<zone>[^/]+)/reservations", "reservations.list"),
        ("GET", r"/zones/(?P<zone>[^/]+)/reservations/(?P<name>[^/]+)", "reservations.get"),
    ]
]
ROUTES += [("GET", re.compile(_TPU + r"/acceleratorTypes/(?P<name>[^/]+)$"),
            "tpu.acceleratorTypes.get")]

# The network a cluster joins: its subnet (Private Google Access) and the firewall rules.
ROUTES += [
    (verb, re.compile(_COMPUTE + pattern + "$"), method)
    for verb, pattern, method in [
        ("GET", r"/regions/(?P<region>[^/]+)/subnetworks", "subnetworks.list"),
        ("GET", r"/regions/(?P<region>[^/]+)/subnetworks/(?P<name>[^/]+)", "subnetworks.get"),
        ("GET", r"/global/firewalls", "firewalls.list"),
        ("POST", r"/global/networks", "networks.insert"),
        ("GET", r"/global/networks/(?P<name>[^/]+)", "networks.get"),
        ("DELETE", r"/global/networks/(?P<name>[^/]+)", "networks.delete"),
        ("POST", r"/regions/(?P<region>[^/]+)/subnetworks", "subnetworks.insert"),
        ("DELETE", r"/regions/(?P<region>[^/]+)/subnetworks/(?P<name>[^/]+)",
         "subnetworks.delete"),
    ]
]

# TPU quotas: the TPU API has no quota method; Service Usage v1beta1 lists them.
ROUTES += [
    ("GET", re.compile(r"/v1beta1/projects/(?P<project>[^/]+)/services/(?P<service>[^/]+)"
                       r"/consumerQuotaMetrics$"), "serviceusage.consumerQuotaMetrics.list"),
]

# Firewalls, disks, service accounts, IAM policies, services and secrets (a gcp provider's).
ROUTES += PLATFORM_ROUTES
# What `invoke catalog-refresh` lists: regions, machine/GPU/TPU types, Compute's billing SKUs.
ROUTES += LISTING_ROUTES
# Calls whose caller process is recorded (`FakeComputeServer.creators`): what creates nodes.
CREATING_METHODS = frozenset({"insert", "bulkInsert", "tpu.create"})


def _labels_match(labels: dict[str, str] | None, wanted: dict[str, str]) -> bool:
    labels = labels or {}
    return all(labels.get(key) == value for key, value in wanted.items())


def _page(items: list[Any], query: dict[str, str], size_key: str) -> tuple[list[Any], str]:
    """A page as Compute lists give them: `maxResults` 0 to 500, inclusive, default 500; a
    `nextPageToken` while more remain (https://cloud.google.com/compute/docs/reference/rest/
    v1/instances/list). TPU's `pageSize` has no documented most (10**6 here)."""
    if size_key == "maxResults":
        return list_page(items, query, size_key, 500, 500)
    return list_page(items, query, size_key, 10**6, 10**6)


@dataclass(frozen=True)
class Served:
    """One API request the fake answered: its method (a ROUTES name) and the TCP connection it
    came over (numbered from 1 as they open). A client keeps its connection open between calls,
    so the connections a run used count the clients it built."""

    method: str
    connection: int


class FakeComputeServer:
    """Start with `start()` (or as a context manager); `endpoint` is what clients point at."""

    def __init__(self, faults: Faults | None = None, wait_max_s: float = 5.0,
                 profile: CloudProfile | None = None) -> None:
        """`profile` (google_profile.py): how fast and how strict it answers; it sets the
        faults' latency and operation time and the wait limit. None: instant, unlimited."""
        self.faults = faults or Faults()
        self.profile = profile
        self.limiter: RateLimiter | None = None
        if profile is not None:
            self.faults.latency_s, self.faults.operation_s = profile.latency_s, profile.operation_s
            wait_max_s = profile.wait_max_s
            self.limiter = RateLimiter(profile) if profile.quotas else None
        self.cloud = FakeCloud(self.faults, profile.pending_share if profile else 0.0)
        self.queued = QueuedResources(self.cloud)
        self.platform = Platform()
        self.listings = Listings()
        # (method, pid, command line of the calling process) of every node-creating call
        self.creators: list[tuple[str, int | None, str]] = []
        self.identities: Identities = IDENTITIES
        self.storage = FakeStorage(gate=self._storage_gate)
        self.authorizations: list[str] = []  # each request's Authorization header, in order
        self.served: list[Served] = []  # every API request routed, in order
        self._connections = itertools.count(1)
        self._connections_lock = threading.Lock()
        # (project, zone, instance) -> {"namespace/key": value}, as a guest agent publishes
        self.guest_attributes: dict[tuple[str, str, str], dict[str, str]] = {}
        self.wait_max_s = wait_max_s
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._http.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        host, port = self._http.server_address[:2]
        return f"{host}:{port}"

    def start(self) -> FakeComputeServer:
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeComputeServer:
        return self.start()

    # ------------------------------------------------------------------ identities

    def user_token(self) -> str:
        """A fresh access token of the user's own credentials (cloud-platform)."""
        return self.identities.user_token()

    def vm_token(self, email: str, scopes: list[str]) -> str:
        """The token a metadata server hands an instance running as `email` with `scopes`."""
        return self.identities.vm_token(email, scopes)

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ views for tests

    def instances(self, project: str, zone: str, **labels: str) -> dict[str, dict[str, Any]]:
        """Instances of a zone (settled), optionally only those carrying the given labels."""
        self.cloud.settle()
        with self.cloud.lock:
            return {name: dict(i) for name, i in self.cloud.zone_instances(project, zone).items()
                    if _labels_match(i.get("labels"), labels)}

    def tpu_nodes(self, project: str, zone: str) -> dict[str, dict[str, Any]]:
        self.cloud.settle()
        with self.cloud.lock:
            return {name: dict(n) for name, n in self.cloud.location_nodes(project, zone).items()}

    # ------------------------------------------------------------------ request handling

    def next_connection(self) -> int:
        with self._connections_lock:
            return next(self._connections)

    def handle(self, verb: str, path: str, query: dict[str, str], body: Any,
               peer_port: int | None = None, connection: int = 0,
               authorization: str | None = None) -> Any:
        for route_verb, pattern, method in ROUTES:
            match = pattern.match(path) if route_verb == verb else None
            if match is None:
                continue
            self.cloud.calls[method] += 1
            self.served.append(Served(method, connection))
            self._authorize(method, match.groupdict(), body, self.identities.who(authorization))
            if method in CREATING_METHODS and peer_port is not None:
                self.creators.append(
                    (method, *peer_process(peer_port, self._http.server_address[1])))
            if self.faults.latency_s:
                time.sleep(self.faults.latency_s)
            if self.limiter is not None and path.startswith("/compute/v1/"):
                self.limiter.admit(match.group("project"), method)
            self._injected_fault(method)
            self.cloud.settle()
            if method in ("platform.firewalls.insert", "platform.routers.insert") and \
                    (body or {}).get("network"):
                with self.cloud.lock:
                    self.cloud.vpc.check_network(match["project"], str((body or {}).get(
                        "network") or ""))
            if method.startswith("platform."):
                return self.platform.handle(method, match.groupdict(), query, body)
            if method.startswith("listing."):
                return self.listings.handle(method, match.groupdict(), query, body)
            answer = getattr(self, "_" + method.replace(".", "_"))(match.groupdict(), query,
                                                                    body)
            if self.faults.take_dropped(method):
                raise DroppedAnswer(method)
            return answer
        raise ApiError(404, f"no fake route for {verb} {path}", "notFound")

    def _injected_fault(self, method: str) -> None:
        """The fault `Faults.fail_next` queued for this method, raised as Google answers it."""
        fault = self.faults.take_error(method)
        if fault is None:
            return
        status, reason = fault if isinstance(fault, tuple) else (
            fault, _FAULT_REASONS.get(fault, "backendError"))
        refused = ApiError(status, _FAULT_MESSAGES.get(
            reason, _STATUS_MESSAGES.get(status, "injected fault")), reason)
        if status in (429, 503) and self.faults.retry_after_s is not None:
            refused.retry_after = self.faults.retry_after_s
        raise refused

    def _authorize(self, method: str, params: dict[str, str], body: Any, token: Token) -> None:
        """The caller's scope and IAM permission for the call (tests/fakes/compute/access.py),
        and `iam.serviceAccounts.actAs` on every service account a create attaches."""
        policies = self.platform.resource_policies(method, params) if "project" in params \
            else []
        authorize(RULES[method], token, params, body, policies)
        for email in attached_accounts(method, body):
            if email == "default":  # the project's Compute Engine default service account
                email = f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com"
            project = email.split("@", 1)[1].split(".", 1)[0] \
                if email.endswith(".iam.gserviceaccount.com") else params["project"]
            policies = self.platform.resource_policies("", {"project": project,
                                                            "email": email})
            if not granted(token.principal, "iam.serviceAccounts.actAs", policies):
                raise act_as_refusal(email)

    def _storage_gate(self, method: str, params: dict[str, str], query: dict[str, str],
                      authorization: str | None) -> None:
        """Cloud Storage's check: a bucket's calls are decided by its project's policy and
        the bucket's own (BucketIAMMember); creating one by the project named."""
        self._injected_fault(method)  # Cloud Storage's calls suffer the queued faults too
        token = self.identities.who(authorization)
        project = query.get("project") if method == "storage.buckets.insert" \
            else self.storage.projects.get(params.get("bucket", ""))
        policies = [self.platform.project_policy(project)] if project else []
        bucket = params.get("bucket")
        if bucket:
            policies.append(self.storage.policies.get(bucket, {}))
        authorize(STORAGE_RULES[method], token, {**params, "project": project or ""}, None,
                  policies)

    @staticmethod
    def _compute_filter(query: dict[str, str]) -> Predicate:
        try:
            return compile_filter(query.get("filter"))
        except FilterError as exc:
            raise ApiError(400, f"Invalid value for field 'filter': '{query.get('filter')}'. "
                           f"Invalid list filter expression: {exc}.") from None

    def _list(self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        wanted = self._compute_filter(query)
        with self.cloud.lock:
            items = [dict(i) for i in self.cloud.zone_instances(p["project"], p["zone"]).values()
                     if wanted(i)]
        page, token = _page(items, query, "maxResults")
        return {"kind": "compute#instanceList", "items": page, "nextPageToken": token}

    def _aggregatedList(self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        """Every zone's matching instances, zone by zone, in pages of `maxResults` instances
        as lists give them; a scope appears on the pages that hold its instances."""
        wanted = self._compute_filter(query)
        with self.cloud.lock:
            pairs = [(zone, dict(i)) for (project, zone), instances
                     in sorted(self.cloud.instances.items())
                     if project == p["project"] for i in instances.values() if wanted(i)]
        page, token = _page(pairs, query, "maxResults")
        result: dict[str, Any] = {}
        for zone, instance in page:
            result.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(instance)
        answer = {"kind": "compute#instanceAggregatedList", "items": result}
        return {**answer, "nextPageToken": token} if token else answer

    def _insert(self, p: dict[str, str], query: dict[str, str], body: Any) -> Any:
        name = body.pop("name", None)
        if not name:
            raise ApiError(400, "Invalid value for field 'resource.name': ''")
        operation = self.cloud.insert_instances(p["project"], p["zone"], [name], body,
                                                "insert", query.get("requestId"))
        return operation.compute_json()

    def _bulkInsert(self, p: dict[str, str], query: dict[str, str], body: Any) -> Any:
        """The request rules of BulkInsertInstanceResource
        (https://cloud.google.com/compute/docs/reference/rest/v1/instances/bulkInsert): either
        `namePattern` or `perInstanceProperties` names the instances; a pattern holds one
        continuous run of at most 18 `#`, numbered after the biggest existing match; `count`
        is required, `minCount` at most `count`. With a profile's limit, more than that many
        bulk operations running at once are refused (google_profile.py)."""
        per_instance = list((body.get("perInstanceProperties") or {}).keys())
        pattern = str(body.get("namePattern") or "")
        if not per_instance and not pattern:
            raise ApiError(400, "Invalid value for field 'resource': either namePattern or "
                                "perInstanceProperties must be set.")
        count = int(body.get("count") or 0)
        if count < 1:
            raise ApiError(400, "Invalid value for field 'resource.count': "
                                f"'{body.get('count')}'. count must be at least 1.")
        if int(body.get("minCount") or count) > count:
            raise ApiError(400, "Invalid value for field 'resource.minCount': "
                                f"'{body.get('minCount')}'. minCount must not exceed count.")
        names = per_instance or self._pattern_names(p, pattern, count)
        if len(names) != count:
            raise ApiError(400, "count must equal the number of perInstanceProperties names")
        limit = self.profile.bulk_operations_at_once if self.profile else None
        if limit is not None and self.cloud.running_operations(p["project"],
                                                               "bulkInsert") >= limit:
            raise bulk_limit_error()
        properties = dict(body.get("instanceProperties") or {})
        operation = self.cloud.insert_instances(p["project"], p["zone"], names, properties,
                                                "bulkInsert", query.get("requestId"))
        return operation.compute_json()

    def _pattern_names(self, p: dict[str, str], pattern: str, count: int) -> list[str]:
        runs = re.findall(r"#+", pattern)
        if len(runs) != 1 or len(runs[0]) > 18:
            raise ApiError(400, f"Invalid value for field 'resource.namePattern': '{pattern}'. "
                                "The pattern must contain one continuous sequence of at most "
                                "18 '#' characters.")
        head, tail = pattern.split(runs[0])
        number = re.compile(re.escape(head) + rf"(\d{{{len(runs[0])}}})" + re.escape(tail))
        with self.cloud.lock:
            taken = [int(m.group(1)) for name in self.cloud.zone_instances(p["project"],
                                                                          p["zone"])
                     if (m := number.fullmatch(name))]
        first = max(taken, default=0) + 1
        return [f"{head}{n:0{len(runs[0])}d}{tail}" for n in range(first, first + count)]

    def _reservations_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        with self.cloud.lock:
            return self.cloud.reservations.get(p["project"], p["zone"], p["name"]).json()

    def _reservations_list(self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        with self.cloud.lock:
            items = [r.json() for r in self.cloud.reservations.in_zone(p["project"], p["zone"])]
        page, token = _page(items, query, "maxResults")
        return {"kind": "compute#reservationList", "items": page, "nextPageToken": token}

    def _get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return self.cloud.get_instance(p["project"], p["zone"], p["name"])

    def _delete(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        operation = self.cloud.change_instance(p["project"], p["zone"], p["name"], "delete")
        return operation.compute_json()

    def _stop(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        operation = self.cloud.change_instance(p["project"], p["zone"], p["name"], "stop")
        return operation.compute_json()

    def _start(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        operation = self.cloud.change_instance(p["project"], p["zone"], p["name"], "start")
        return operation.compute_json()

    def _setLabels(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        operation = self.cloud.set_labels(p["project"], p["zone"], p["name"],
                                          body.get("labels"), body.get("labelFingerprint"))
        return operation.compute_json()

    def _setMetadata(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        operation = self.cloud.set_metadata(p["project"], p["zone"], p["name"], body)
        return operation.compute_json()

    def _setMachineType(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        operation = self.cloud.set_machine_type(p["project"], p["zone"], p["name"],
                                                str(body.get("machineType") or ""))
        return operation.compute_json()

    def _operations_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return self._scoped_operation(p, "compute").compute_json()

    def _wait(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        operation = self._scoped_operation(p, "compute")
        self.cloud.wait_for(operation, self.wait_max_s)
        return operation.compute_json()

    def _zoneOperations_list(self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        """Newest last, as GCE lists them; `filter` as instances.list takes it."""
        wanted = self._compute_filter(query)
        items = [body for body in (op.compute_json()
                                   for op in self.cloud.zone_operations(p["project"], p["zone"]))
                 if wanted(body)]
        page, token = _page(items, query, "maxResults")
        return {"kind": "compute#operationList", "items": page, "nextPageToken": token}

    def _scoped_operation(self, p: dict[str, str], kind: str) -> Operation:
        operation = self.cloud.operation(p["name"])
        if operation.kind != kind or not operation.scope.endswith(f"/{p['zone']}"):
            raise ApiError(404, f"operation {p['name']} not found", "notFound")
        return operation

    def _getGuestAttributes(self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        """GCE's answer for `queryPath=<namespace>/`: the entries under it, or 404 when none."""
        published = self.guest_attributes.get((p["project"], p["zone"], p["name"]), {})
        prefix = query.get("queryPath", "")
        items = [{"namespace": path.split("/", 1)[0], "key": path.split("/", 1)[1], "value": v}
                 for path, v in sorted(published.items()) if path.startswith(prefix)]
        if not items:
            raise ApiError(404, f"The resource '{prefix}' of type 'Guest Attribute' was not "
                                "found.", "notFound")
        return {"kind": "compute#guestAttributes", "queryPath": prefix,
                "queryValue": {"items": items}}

    def _tpu_getGuestAttributes(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        """The TPU v2 answer (discovery document: GetGuestAttributesResponse): one
        GuestAttributes per asked worker, its entries under `queryPath`, from the same table
        as instances (keyed by the node's name); 404 when there are none."""
        published = self.guest_attributes.get((p["project"], p["zone"], p["name"]), {})
        prefix = (body or {}).get("queryPath", "")
        items = [{"namespace": path.split("/", 1)[0], "key": path.split("/", 1)[1], "value": v}
                 for path, v in sorted(published.items()) if path.startswith(prefix)]
        if not items:
            raise ApiError(404, f"no guest attributes under '{prefix}'", "notFound")
        workers = (body or {}).get("workerIds") or ["0"]
        return {"guestAttributes": [{"queryPath": prefix, "queryValue": {"items": items}}
                                    for _ in workers]}

    def _tpu_create(self, p: dict[str, str], query: dict[str, str], body: Any) -> Any:
        node_id = query.get("nodeId")
        if not node_id:
            raise ApiError(400, "nodeId is required")
        return self.cloud.create_node(p["project"], p["zone"], node_id, body).tpu_json()

    def _tpu_list(self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        with self.cloud.lock:
            nodes = [dict(n) for n in self.cloud.location_nodes(p["project"], p["zone"]).values()]
        page, token = _page(nodes, query, "pageSize")
        return {"nodes": page, "nextPageToken": token}

    def _tpu_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return self.cloud.get_node(p["project"], p["zone"], p["name"])

    def _tpu_delete(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return self.cloud.change_node(p["project"], p["zone"], p["name"], "delete").tpu_json()

    def _tpu_stop(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return self.cloud.change_node(p["project"], p["zone"], p["name"], "stop").tpu_json()

    def _tpu_start(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return self.cloud.change_node(p["project"], p["zone"], p["name"], "start").tpu_json()

    def _tpu_operations_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return self._scoped_operation(p, "tpu").tpu_json()

    def _tpu_patch(self, p: dict[str, str], query: dict[str, str], body: Any) -> Any:
        return self.cloud.patch_node(p["project"], p["zone"], p["name"], body,
                                     query.get("updateMask", "")).tpu_json()

    def _tpu_queuedResources_create(self, p: dict[str, str], query: dict[str, str],
                                    body: Any) -> Any:
        request_id = query.get("queuedResourceId")
        if not request_id:
            raise ApiError(400, "queuedResourceId is required")
        return self.queued.create(p["project"], p["zone"], request_id, body).tpu_json()

    def _tpu_queuedResources_list(self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        page, token = _page(self.queued.list(p["project"], p["zone"]), query, "pageSize")
        return {"queuedResources": page, "nextPageToken": token}

    def _tpu_queuedResources_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return self.queued.get(p["project"], p["zone"], p["name"])

    def _tpu_queuedResources_delete(self, p: dict[str, str], query: dict[str, str],
                                    _: Any) -> Any:
        force = query.get("force", "").lower() in ("true", "1")
        return self.queued.delete(p["project"], p["zone"], p["name"], force).tpu_json()

    # ------------------------------------------------------------------ the catalogue

    def _zones_list(self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        catalogue = self.cloud.catalogue
        items = [catalogue.zone_json(p["project"], region, zone)
                 for region, zone in catalogue.all_zones()]
        page, token = _page(items, query, "maxResults")
        return {"kind": "compute#zoneList", "items": page, "nextPageToken": token}

    def _machineTypes_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        found = self.cloud.catalogue.machine_type_json(p["project"], p["zone"], p["name"])
        return found or self._not_found(p, "machineTypes")

    def _acceleratorTypes_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        found = self.cloud.catalogue.accelerator_type_json(p["project"], p["zone"], p["name"])
        return found or self._not_found(p, "acceleratorTypes")

    def _tpu_acceleratorTypes_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        found = self.cloud.catalogue.tpu_accelerator_type_json(p["project"], p["zone"],
                                                               p["name"])
        if found is None:
            raise ApiError(404, f"Resource 'projects/{p['project']}/locations/{p['zone']}/"
                                f"acceleratorTypes/{p['name']}' was not found", "notFound")
        return found

    def _regions_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        return self.cloud.catalogue.region_json(p["project"], p["region"])

    def _subnetworks_list(self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        subnets = self.cloud.vpc.region_subnetworks(p["project"], p["region"])
        page, token = _page(subnets, query, "maxResults")
        return {"kind": "compute#subnetworkList", "items": page, "nextPageToken": token}

    def _subnetworks_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        found = self.cloud.vpc.subnetwork(p["project"], p["region"], p["name"])
        if found is None:
            raise ApiError(404, f"The resource 'projects/{p['project']}/regions/{p['region']}/"
                           f"subnetworks/{p['name']}' was not found", "notFound")
        return found

    # VPC networks and subnets (tests/fakes/compute/vpc.py): writes finish at once.

    def _networks_insert(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        with self.cloud.lock:
            link = self.cloud.vpc.insert_network(p["project"], body or {})
        return self.platform._done(p["project"], "insert", link)

    def _networks_get(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        with self.cloud.lock:
            found = self.cloud.vpc.network(p["project"], p["name"])
        if found is None:
            raise ApiError(404, f"The resource 'projects/{p['project']}/global/networks/"
                           f"{p['name']}' was not found", "notFound")
        return found

    def _networks_delete(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        with self.cloud.lock, self.platform.lock:
            users = [(rule["selfLink"], rule["network"])
                     for rule in self.platform.firewalls.get(p["project"], {}).values()]
            users += [(router["selfLink"], router["network"])
                      for (project, _), routers in self.platform.routers.items()
                      if project == p["project"] for router in routers.values()]
            users += self._interface_users("network")
            link = self.cloud.vpc.delete_network(p["project"], p["name"], users)
        return self.platform._done(p["project"], "delete", link)

    def _subnetworks_insert(self, p: dict[str, str], _q: dict[str, str], body: Any) -> Any:
        with self.cloud.lock:
            link = self.cloud.vpc.insert_subnetwork(p["project"], p["region"], body or {})
        return self.platform._done(p["project"], "insert", link, f"regions/{p['region']}")

    def _subnetworks_delete(self, p: dict[str, str], _q: dict[str, str], _: Any) -> Any:
        with self.cloud.lock:
            link = self.cloud.vpc.delete_subnetwork(p["project"], p["region"], p["name"],
                                                    self._interface_users("subnetwork"))
        return self.platform._done(p["project"], "delete", link, f"regions/{p['region']}")

    def _interface_users(self, field: str) -> list[tuple[str, str]]:
        """(instance self-link, the network or subnet one of its interfaces names)."""
        return [(instance["selfLink"], str(nic.get(field) or ""))
                for instances in self.cloud.instances.values() for instance in instances.values()
                for nic in instance.get("networkInterfaces") or []]

    def _firewalls_list(self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        wanted = self._compute_filter(query)
        items = [dict(rule) for rule in self.cloud.catalogue.firewalls if wanted(rule)]
        page, token = _page(items, query, "maxResults")
        return {"kind": "compute#firewallList", "items": page, "nextPageToken": token}

    def _serviceusage_consumerQuotaMetrics_list(
            self, p: dict[str, str], query: dict[str, str], _: Any) -> Any:
        if self.cloud.catalogue.service_usage_disabled:
            raise ApiError(403, f"Service Usage API has not been used in project {p['project']} "
                           "before or it is disabled.", "accessNotConfigured")
        metrics = self.cloud.catalogue.consumer_quota_metrics_json(p["project"], p["service"])
        page, token = _page(metrics, query, "pageSize")
        return {"metrics": page, "nextPageToken": token} if token else {"metrics": page}

    @staticmethod
    def _not_found(p: dict[str, str], collection: str) -> Any:
        raise ApiError(404, f"The resource 'projects/{p['project']}/zones/{p['zone']}/"
                       f"{collection}/{p['name']}' was not found", "notFound")


class DroppedAnswer(Exception):
    """The call took effect; its answer is not sent (Faults.dropped_answers)."""


# Google's error bodies: a refusal (403 forbidden, "The caller does not have permission"), a rate
# limit (403 or 429 rateLimitExceeded: Compute answers a per-user or per-project limit with
# either, https://cloud.google.com/compute/docs/api-rate-limits#rate_limit_errors), a server
# fault (500/503 backendError).
_FAULT_REASONS = {403: "forbidden", 429: "rateLimitExceeded", 500: "backendError",
                  503: "backendError"}
_FAULT_MESSAGES = {"forbidden": "The caller does not have permission",
                   "rateLimitExceeded": "Rate Limit Exceeded"}
_STATUS_MESSAGES = {500: "Internal Error", 503: "Service Unavailable"}


def _make_handler(server: FakeComputeServer) -> type[BaseHTTPRequestHandler]:
    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; Nagle would hold the body for a delayed ACK.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet: tests read the fake's state, not its access log."""

        def setup(self) -> None:
            super().setup()
            self.connection_number = server.next_connection()  # one handler per connection

        def _serve(self, verb: str) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            server.authorizations.append(self.headers.get("Authorization") or "")
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if server.storage.serves(url.path):  # bytes in and out, not only JSON
                stored = server.storage.handle(verb, url.path, query, self.headers, raw)
                self._answer(stored.status, stored.content_type, stored.body)
                return
            try:
                body = json.loads(raw) if raw else {}
                status, answer = HTTPStatus.OK, server.handle(
                    verb, url.path, query, body, self.client_address[1], self.connection_number,
                    self.headers.get("Authorization"))
            except ApiError as exc:
                status, answer = HTTPStatus(exc.status), exc.body()
                if exc.retry_after is not None:
                    self._answer(status, "application/json", json.dumps(answer).encode(),
                                 {"Retry-After": str(exc.retry_after)})
                    return
            except DroppedAnswer:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self._answer(status, "application/json", json.dumps(answer).encode())

        def _answer(self, status: int, content_type: str, payload: bytes,
                    headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # noqa: N802
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def do_DELETE(self) -> None:  # noqa: N802
            self._serve("DELETE")

        def do_PATCH(self) -> None:  # noqa: N802
            self._serve("PATCH")

        def do_PUT(self) -> None:  # noqa: N802
            self._serve("PUT")

    return RequestHandler
