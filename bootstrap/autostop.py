"""The head's autostop daemon: when the cluster has been idle for the whole window, stop (or
delete) every node of it, workers first, the head last, with the head's service account; and,
with `provider.spend_cap`, the spend cap's total: it keeps the head's spend ledger and at
`max_usd_total` stops every worker (`stop_workers`) or every node (`down`) the same way.

It runs on the head's host, started by the head's startup script (which decodes it from
metadata `ray-autostop-daemon`), so it works with the laptop off. Standard library only: the
host's `python3` may have neither Ray (docker clusters run Ray in the container) nor Google's
client libraries, and the head's Ray is reachable over HTTP anyway (`--net=host`).

Idle means, at every check over the window: no task that is not finished, no actor that is
not dead, no placement group that is not removed, no job pending or running (submitted jobs
and connected drivers alike) — read from Ray's state and job APIs on the head's dashboard, the
service `ray.util.state` and `ray job` talk to — and no SSH session on the head. A job that
ended after the countdown began restarts it, so a short task between two checks counts too.
When Ray cannot be asked, the cluster counts as busy: autostop never stops what it cannot see.

Settings: metadata `ray-autostop` (JSON written by the program from `provider.autostop`),
overridden by `~/.ray-autostop.json` on the head, which `invoke autostop` writes over SSH
(`{"idle_minutes": N, "down": bool}`; `idle_minutes` 0 turns autostop off). Both are re-read
at every check, so neither needs a restart.

It records what it did in the bootstrap log, the guest attribute `ray-bootstrap/status`
(`autostopped:<UTC time>:<stopped|deleted>:idle <N> min`) and the labels `ray-autostop`
(`stopped` / `deleted`) and `ray-autostop-at` on every node it stops, which `invoke status`
reads while the head is down.

The spend cap (metadata `ray-spend-cap`, bootstrap.spend_metadata): at every check the daemon
lists the cluster's nodes, adds what they cost since the last check to the ledger
`~/.ray-spend.json` (head_provider/spend.py's Ledger: it survives restarts) and publishes the
total, the hourly projection and the cap as JSON in the guest attribute `ray-spend/status`. At
the total cap it stops the running workers (`stop_workers`: the head stays up to say why, and
workers started again later are stopped at the next check) or every node (`down`), labelling
each `ray-spend-cap` (`stopped` / `deleted`) and `ray-spend-cap-at`, and recording the stop in
`ray-spend/status` (and, for `down`, `ray-bootstrap/status`: `spend-capped:<UTC time>:...`).
Ray's busy or idle state does not matter to the cap.

Shipped as a zip of this module and the head provider's standard-library modules it imports
(bootstrap.autostop_metadata), which `python3` runs as it is.

Environment knobs (unset on GCE; set by the local cluster and the tests), as in
node_bootstrap.sh: RAY_BOOTSTRAP_METADATA_DIR / _METADATA_URL, RAY_BOOTSTRAP_STATUS_DIR, and
RAY_BOOTSTRAP_DASHBOARD_URL (default http://127.0.0.1:8265), RAY_BOOTSTRAP_COMPUTE_URL
(default https://compute.googleapis.com/compute/v1), RAY_BOOTSTRAP_TPU_URL (default
https://tpu.googleapis.com/v2), RAY_BOOTSTRAP_AUTOSTOP_POLL (seconds between checks, default
15), RAY_BOOTSTRAP_PROC_DIR (where SSH sessions are looked for, default /proc), and
RAY_AUTH_TOKEN_PATH (Ray's auth token, sent to the dashboard; the startup script sets it when
token authentication is on). Every Compute/TPU call carries the instance's service-account
token, an emulator's (http://) too: the tests' fake checks who calls, as Google does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bootstrap.head_provider.instance_metadata import ApiError, Metadata, http_json
from bootstrap.head_provider.spend import (
    CAPPED_AT_LABEL,
    CAPPED_LABEL,
    LABEL_TIME_FORMAT,
    SPEND_CAP_KEY,
    WORKERS_STOPPED,
    Ledger,
    NodeUsage,
    SpendCap,
)
from bootstrap.head_provider.time_limit import (
    END_LABEL,
    ENDING_ATTRIBUTE,
    WARN_BEFORE_S,
    end_label,
    end_of,
    warning,
)

__all__ = ["ApiError", "Autostop", "Cloud", "Metadata", "RayState", "http_json", "main",
           "ssh_sessions", "stop_cluster"]

SETTINGS_KEY = "ray-autostop"
DAEMON_KEY = "ray-autostop-daemon"
OVERRIDE_FILE = ".ray-autostop.json"  # in the head's home: `invoke autostop` writes it
STATUS_ATTRIBUTE = "ray-bootstrap/status"
REASON_LABEL = "ray-autostop"
TIME_LABEL = "ray-autostop-at"
LEDGER_FILE = ".ray-spend.json"  # in the head's home, beside the override
SPEND_ATTRIBUTE = "ray-spend/status"
USER_NODE_TYPE_LABEL = "ray-user-node-type"  # Ray's label naming a node's type
DEFAULT_POLL_SECONDS = 15.0
OPERATION_DEADLINE = 900.0

# Ray's states that mean "still going" are everything but these.
_TASK_DONE = ("FINISHED", "FAILED")
_ACTOR_DONE = ("DEAD",)
_GROUP_DONE = ("REMOVED",)
_JOB_BUSY = ("PENDING", "RUNNING")
# Billed as running, but already on their way down: the cap does not stop them again.
_GOING_DOWN = ("STOPPING", "SUSPENDING")
# `sshd: user@pts/0`, `sshd: user@notty`; OpenSSH 9.8+ names it `sshd-session: ...`.
_SSH_SESSION = re.compile(r"^sshd(?:-session)?: (\S+@\S+)")


def log(message: str) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} [ray-bootstrap] autostop: {message}", flush=True)


# ---------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """What the program wrote in metadata `ray-autostop`, with the head's override applied."""

    project: str
    zone: str
    cluster_labels: dict[str, str]  # every node of the cluster carries these
    head_labels: dict[str, str]  # and the head these too
    tpu: bool = False
    idle_minutes: float = 0.0
    down: bool = False
    source: str = "metadata"
    ends: bool = False  # some node may have an end (a flex-start rung): follow the ends

    @property
    def enabled(self) -> bool:
        return self.idle_minutes > 0

    @property
    def window_seconds(self) -> float:
        return self.idle_minutes * 60.0

    def describe(self) -> str:
        if not self.enabled:
            return f"off ({self.source})"
        action = "delete" if self.down else "stop"
        return f"{action} after {self.idle_minutes:g} idle minutes ({self.source})"


def read_settings(metadata: Metadata, home: Path) -> Settings | None:
    """The current settings; None when the program wrote none (then nothing is stopped)."""
    raw = metadata.attribute(SETTINGS_KEY)
    if not raw:
        return None
    data = json.loads(raw)
    settings = Settings(
        project=data["project"], zone=data["zone"], cluster_labels=data["cluster_labels"],
        head_labels=data["head_labels"], tpu=bool(data.get("tpu")),
        idle_minutes=float(data.get("idle_minutes") or 0), down=bool(data.get("down")),
        ends=bool(data.get("ends")))
    override = home / OVERRIDE_FILE
    if override.is_file():
        try:
            own = json.loads(override.read_text())
            settings = Settings(
                settings.project, settings.zone, settings.cluster_labels, settings.head_labels,
                settings.tpu, float(own.get("idle_minutes") or 0), bool(own.get("down")),
                source=f"{override}, written by invoke autostop", ends=settings.ends)
        except (OSError, ValueError, AttributeError) as exc:
            log(f"{override} is unreadable ({exc}): the metadata setting stays")
    return settings


# ---------------------------------------------------------------- is the cluster busy?


@dataclass
class Activity:
    """One look at the cluster: why it is busy (empty: idle) and when its last job ended."""

    busy: list[str] = field(default_factory=list)
    last_job_end: float | None = None  # epoch seconds


class RayState:
    """Ray's state and job APIs on the head's dashboard; with Ray's token authentication, the
    token in file `token_path` goes in each request's Authorization header, as Ray's own
    clients send it (read at every request: a re-applied node may rewrite it)."""

    def __init__(self, dashboard_url: str, token_path: str = "") -> None:
        self.url = dashboard_url.rstrip("/")
        self.token_path = token_path

    def _headers(self) -> dict[str, str]:
        if not self.token_path:
            return {}
        try:
            token = Path(self.token_path).read_text().strip()
        except OSError as exc:
            raise ApiError(f"cannot read Ray's auth token {self.token_path}: "
                           f"{exc.strerror}") from None
        return {"Authorization": f"Bearer {token}"}

    def _unfinished(self, resource: str, done_states: tuple) -> list[dict[str, Any]]:
        query = [("limit", "100"), ("detail", "false")]
        for state in done_states:  # filters AND together: state != each terminal state
            query += [("filter_keys", "state"), ("filter_predicates", "!="),
                      ("filter_values", state)]
        answer = http_json(f"{self.url}/api/v0/{resource}?{urllib.parse.urlencode(query)}",
                           headers=self._headers(), tries=1)
        if not answer.get("result"):
            raise ApiError(f"Ray's state API ({resource}): {answer.get('msg')}")
        return answer["data"]["result"]["result"]

    def activity(self) -> Activity:
        seen = Activity()
        for resource, done, what in (("tasks", _TASK_DONE, "task"),
                                     ("actors", _ACTOR_DONE, "actor"),
                                     ("placement_groups", _GROUP_DONE, "placement group")):
            for item in self._unfinished(resource, done):
                name = item.get("name") or item.get("class_name") or item.get(
                    "placement_group_id", "")
                seen.busy.append(f"{what} {name} is {item.get('state')}")
        jobs = http_json(f"{self.url}/api/jobs/", headers=self._headers(), tries=1)
        for job in jobs:
            if job.get("status") in _JOB_BUSY:
                ident = job.get("submission_id") or job.get("job_id")
                seen.busy.append(f"job {ident} ({job.get('type', '').lower()}) is "
                                 f"{job.get('status')}")
            elif job.get("end_time"):
                end = job["end_time"] / 1000.0
                seen.last_job_end = max(seen.last_job_end or end, end)
        return seen


def ssh_sessions(proc_dir: Path) -> dict[int, str]:
    """pid -> `user@tty` of every SSH session open on this machine (sshd's per-session
    process)."""
    sessions = {}
    for entry in proc_dir.iterdir() if proc_dir.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                "utf-8", "replace").strip()
        except OSError:
            continue
        match = _SSH_SESSION.match(command)
        if match:
            sessions[int(entry.name)] = match.group(1)
    return sessions


# ---------------------------------------------------------------- stopping the cluster


@dataclass(frozen=True)
class CloudNode:
    kind: str  # "compute" or "tpu"
    name: str  # instance name, or the TPU node's full resource name
    labels: dict[str, str]
    label_fingerprint: str = ""
    item: dict[str, Any] = field(default_factory=dict)  # the API's whole answer for it

    @property
    def short_name(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def zone(self) -> str:
        """A compute instance's zone, from its `zone` URL (empty for a TPU node)."""
        return str(self.item.get("zone", "")).rsplit("/", 1)[-1]

    def usage(self, node_type_label: str, now: datetime) -> NodeUsage:
        """What its price and uptime are read from."""
        if self.kind == "tpu":
            return NodeUsage.of_tpu_node(self.item, node_type_label, now)
        return NodeUsage.of_instance(self.item, node_type_label, now)


@dataclass(frozen=True)
class Stop:
    """One stop of the cluster: why, whether nodes are deleted, whether the head stays up,
    and the labels that record it on each node (reason, time)."""

    reason: str
    delete: bool
    keep_head: bool = False
    labels: tuple[str, str] = (REASON_LABEL, TIME_LABEL)

    @property
    def action(self) -> str:
        return "deleted" if self.delete else "stopped"


class Cloud:
    """The Compute v1 and TPU v2 REST calls autostop makes, as the head's service account."""

    def __init__(self, metadata: Metadata, compute_url: str, tpu_url: str) -> None:
        self.metadata = metadata
        self.compute_url = compute_url.rstrip("/")
        self.tpu_url = tpu_url.rstrip("/")

    @classmethod
    def from_environment(cls, metadata: Metadata) -> Cloud:
        return cls(metadata,
                   os.environ.get("RAY_BOOTSTRAP_COMPUTE_URL")
                   or "https://compute.googleapis.com/compute/v1",
                   os.environ.get("RAY_BOOTSTRAP_TPU_URL") or "https://tpu.googleapis.com/v2")

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.metadata.token()}"}

    def _call(self, url: str, method: str = "GET", body: Any = None) -> Any:
        return http_json(url, method, body, self._headers())

    def nodes(self, settings: Settings) -> list[CloudNode]:
        """Every instance (and TPU node) carrying the cluster's labels, the autoscaler's too."""
        found: list[CloudNode] = []
        # Every zone of the project: a worker group's zone failover may have put workers
        # outside the head's zone, and they cost the same and must stop the same.
        base = f"{self.compute_url}/projects/{settings.project}/aggregated/instances"
        query = {"filter": " AND ".join(f'(labels.{k} = "{v}")'
                                        for k, v in sorted(settings.cluster_labels.items())),
                 "returnPartialSuccess": "true"}
        token = ""
        while True:
            page = self._call(f"{base}?{urllib.parse.urlencode({**query, 'pageToken': token})}")
            found += [CloudNode("compute", item["name"], item.get("labels") or {},
                                item.get("labelFingerprint", ""), item)
                      for scope in (page.get("items") or {}).values()
                      for item in scope.get("instances") or []]
            token = page.get("nextPageToken") or ""
            if not token:
                break
        if settings.tpu:
            base = f"{self.tpu_url}/projects/{settings.project}/locations/{settings.zone}/nodes"
            token = ""
            while True:
                page = self._call(f"{base}?{urllib.parse.urlencode({'pageToken': token})}")
                found += [CloudNode("tpu", item["name"], item.get("labels") or {}, "", item)
                          for item in page.get("nodes") or []]
                token = page.get("nextPageToken") or ""
                if not token:
                    break
        # The filter is applied here too: it is what makes a node ours.
        return [node for node in found
                if all(node.labels.get(k) == v for k, v in settings.cluster_labels.items())]

    def label(self, settings: Settings, node: CloudNode, stop: Stop, stamp: str) -> None:
        """Record why and when on the node itself (compute instances: TPU labels are fixed)."""
        if node.kind != "compute":
            return
        reason_label, time_label = stop.labels
        self.set_labels(settings, node, {reason_label: stop.action, time_label: stamp})

    def set_labels(self, settings: Settings, node: CloudNode,
                   changes: dict[str, str | None]) -> None:
        """Set (or, with None, remove) labels of a compute instance; a failure is logged."""
        labels = {key: value for key, value in {**node.labels, **changes}.items()
                  if value is not None}
        url = (f"{self.compute_url}/projects/{settings.project}/zones/{node.zone}"
               f"/instances/{node.name}/setLabels")
        try:
            self._call(url, "POST", {"labels": labels,
                                     "labelFingerprint": node.label_fingerprint})
        except ApiError as exc:
            log(f"could not label {node.name} ({exc})")

    def stop(self, settings: Settings, node: CloudNode, delete: bool) -> dict[str, Any]:
        """Start stopping (or deleting) one node; the operation to wait for. TPU nodes are
        always deleted: a slice cannot be stopped, and `up` recreates a missing one."""
        if node.kind == "tpu":
            return {"tpu": self._call(f"{self.tpu_url}/{node.name}", "DELETE")}
        url = (f"{self.compute_url}/projects/{settings.project}/zones/{node.zone}"
               f"/instances/{node.name}")
        return {"compute": self._call(url if delete else f"{url}/stop",
                                      "DELETE" if delete else "POST")}

    def wait(self, settings: Settings, operation: dict[str, Any], deadline: float) -> None:
        """Until the operation is done (or the deadline passes: then go on regardless)."""
        while time.monotonic() < deadline:
            if "tpu" in operation:
                current = self._call(f"{self.tpu_url}/{operation['tpu']['name']}")
                if current.get("done"):
                    return
                time.sleep(2)
                continue
            name = operation["compute"]["name"]
            zone = str(operation["compute"].get("zone") or settings.zone).rsplit("/", 1)[-1]
            current = self._call(
                f"{self.compute_url}/projects/{settings.project}/zones/{zone}"
                f"/operations/{name}/wait", "POST")
            if current.get("status") == "DONE":
                return
        log("an operation did not finish in time: going on")


def is_head(node: CloudNode, settings: Settings) -> bool:
    return all(node.labels.get(k) == v for k, v in settings.head_labels.items())


def stop_cluster(cloud: Cloud, settings: Settings, stop: Stop,
                 now: Callable[[], float] = time.time,
                 nodes: list[CloudNode] | None = None) -> list[str]:
    """Stop (or delete) the workers, wait for them, then the head unless the stop keeps it;
    the names, in order. `nodes`: the cluster's nodes, when the caller has just listed them."""
    doing = "deleting" if stop.delete else "stopping"
    stamp = datetime.fromtimestamp(now(), timezone.utc).strftime(LABEL_TIME_FORMAT)
    nodes = cloud.nodes(settings) if nodes is None else nodes
    workers = [node for node in nodes if not is_head(node, settings)]
    heads = [] if stop.keep_head else [node for node in nodes if is_head(node, settings)]
    log(f"{stop.reason}: {doing} {len(workers)} workers"
        + ("" if stop.keep_head else ", then the head"))
    order: list[str] = []
    for batch in (workers, heads):
        operations = []
        for node in batch:
            cloud.label(settings, node, stop, stamp)
            try:
                operations.append(cloud.stop(settings, node, stop.delete))
            except ApiError as exc:  # one node refusing must not keep the rest running
                log(f"{node.short_name}: could not be {stop.action} ({exc})")
                continue
            order.append(node.short_name)
            log(f"{node.short_name}: {doing}")
        deadline = time.monotonic() + OPERATION_DEADLINE
        for operation in operations:
            try:
                cloud.wait(settings, operation, deadline)
            except ApiError as exc:
                log(f"an operation could not be followed ({exc}): going on")
    return order


# ---------------------------------------------------------------- the loop


class Autostop:
    """Check every `poll_seconds`: count what the cluster spent and stop its workers (or all
    of it) at the spend cap's total; stop the cluster once it has been idle for the window."""

    def __init__(self, metadata: Metadata, home: Path, ray: RayState, cloud: Cloud,
                 proc_dir: Path = Path("/proc"), poll_seconds: float = DEFAULT_POLL_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self.metadata, self.home, self.ray, self.cloud = metadata, home, ray, cloud
        self.proc_dir, self.poll_seconds, self.clock = proc_dir, poll_seconds, clock
        self.idle_since: float | None = None  # None: busy, or autostop is off
        self._said: dict[str, str] = {}
        self._warned: set[str] = set()  # `node@end` already warned of
        self._ending: dict[str, str] | None = None  # what ENDING_ATTRIBUTE says now

    def _report(self, key: str, value: str) -> None:
        try:
            self.metadata.report_attribute(key, value)
        except ApiError as exc:
            log(f"could not write {exc}")

    def _say_once(self, message: str, topic: str = "autostop") -> None:
        if message != self._said.get(topic):
            log(message)
            self._said[topic] = message

    def spend_check(self) -> tuple[Stop, Settings, list[CloudNode]] | None:
        """Count what the cluster spent since the last check; at the total cap, the stop to
        make, with the settings and the nodes to stop (the running ones)."""
        try:
            raw = self.metadata.attribute(SPEND_CAP_KEY)
            settings = read_settings(self.metadata, self.home) if raw else None
            if not raw or settings is None:
                return None
            cap = SpendCap.from_json(raw)
            nodes = self.cloud.nodes(settings)
        except (ApiError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self._say_once(f"spend cap: cannot count ({exc}): trying again", "spend")
            return None
        now = datetime.fromtimestamp(self.clock(), timezone.utc)
        usages = {node.name: node.usage(cap.node_type_label, now) for node in nodes}
        ledger = Ledger.load(self.home / LEDGER_FILE)
        total = ledger.count(cap, list(usages.values()), now)
        keep_head = cap.action != "down"
        running = [node for node in nodes if usages[node.name].running
                   and usages[node.name].state not in _GOING_DOWN
                   and not (keep_head and is_head(node, settings))]
        over = cap.max_usd_total is not None and total >= cap.max_usd_total
        self._mark_head(settings, nodes, over and keep_head)
        stop = None
        if over and running:
            stop = Stop(f"spend cap: ${total:.2f} spent, at or over max_usd_total "
                        f"${cap.max_usd_total:.2f} ({cap.action})", delete=False,
                        keep_head=keep_head, labels=(CAPPED_LABEL, CAPPED_AT_LABEL))
            ledger.capped = {"at": _iso(self.clock()), "action": cap.action,
                             "nodes": [node.short_name for node in running]}
        try:
            ledger.save()
        except OSError as exc:
            log(f"spend cap: cannot write {ledger.path} ({exc}): the count restarts from the "
                "nodes' uptimes if the daemon restarts")
        status = {**ledger.as_dict(), "max_usd_per_hour": cap.max_usd_per_hour,
                  "max_usd_total": cap.max_usd_total, "action": cap.action}
        self._report(SPEND_ATTRIBUTE, json.dumps(status, sort_keys=True))
        self._say_once(f"spend cap: ${total:.2f} so far (cap {_money(cap.max_usd_total)}), "
                       f"${ledger.per_hour:.2f}/h now (cap {_money(cap.max_usd_per_hour)}/h)",
                       "spend")
        return (stop, settings, running) if stop else None

    def end_check(self) -> dict[str, str]:
        """Each node with a time limit (every flex-start VM): label it with its end
        (`ray-ends-at`, which Ray's provider reports as a node tag), publish the ends in the
        guest attribute `ray-capacity/ending`, and warn once in the log when one is
        WARN_BEFORE_S away; name -> end (ISO). Only for a cluster whose settings say some
        node may have an end (`ends`): no other cluster lists its nodes once more per check."""
        try:
            settings = read_settings(self.metadata, self.home)
            if settings is None or not settings.ends:
                return {}
            nodes = self.cloud.nodes(settings)
        except (ApiError, ValueError, KeyError, TypeError) as exc:
            self._say_once(f"node ends: cannot list the nodes ({exc}): trying again", "ends")
            return {}
        now = datetime.fromtimestamp(self.clock(), timezone.utc)
        ending: dict[str, str] = {}
        for node in nodes:
            end = end_of(node.item) if node.kind == "compute" else None
            if end is None:
                continue
            ending[node.short_name] = _iso(end.timestamp())
            if node.labels.get(END_LABEL) != end_label(end):
                self.cloud.set_labels(settings, node, {END_LABEL: end_label(end)})
            key = f"{node.short_name}@{end_label(end)}"
            if (end - now).total_seconds() <= WARN_BEFORE_S and key not in self._warned:
                self._warned.add(key)
                node_type = node.labels.get(USER_NODE_TYPE_LABEL, "")
                log(f"node ending: {warning(node.short_name, node_type, node.item, end, now)}")
        if ending != self._ending:
            self._report(ENDING_ATTRIBUTE, json.dumps(ending, sort_keys=True))
            self._ending = ending
        return ending

    def _mark_head(self, settings: Settings, nodes: list[CloudNode], capped: bool) -> None:
        """While `stop_workers` holds the workers stopped, the head says so in its labels,
        where the launch check (and `invoke status`) read it; raising the cap clears them."""
        for head in (node for node in nodes if is_head(node, settings)):
            if capped == (head.labels.get(CAPPED_LABEL) == WORKERS_STOPPED):
                continue
            stamp = datetime.fromtimestamp(self.clock(), timezone.utc).strftime(
                LABEL_TIME_FORMAT)
            self.cloud.set_labels(settings, head, {CAPPED_LABEL: WORKERS_STOPPED if capped
                                                   else None,
                                                   CAPPED_AT_LABEL: stamp if capped else None})
            log(f"spend cap: head labelled {CAPPED_LABEL}={WORKERS_STOPPED}" if capped
                else "spend cap: under the total cap again: the head's cap labels removed")

    def check(self) -> tuple[str, Settings] | None:
        """One check; when the cluster is to be stopped now, why and with which settings."""
        try:
            settings = read_settings(self.metadata, self.home)
        except (ApiError, ValueError, KeyError) as exc:
            self.idle_since = None
            self._say_once(f"settings unreadable ({exc}): not counting")
            return None
        if settings is None or not settings.enabled:
            self.idle_since = None
            self._say_once(f"off: {settings.describe() if settings else 'no settings'}")
            return None
        now = self.clock()
        try:
            activity = self.ray.activity()
        except ApiError as exc:
            activity = Activity([f"Ray's state API cannot be read ({exc})"])
        activity.busy += [f"SSH session {who}" for who in ssh_sessions(self.proc_dir).values()]
        if activity.busy:
            self.idle_since = None
            self._say_once(f"busy: {'; '.join(activity.busy[:3])} ({settings.describe()})")
            return None
        start = self.idle_since or now
        if activity.last_job_end is not None and activity.last_job_end > start:
            start = activity.last_job_end  # a job came and went between two checks
        self.idle_since = start
        self._say_once(f"idle since {_iso(start)}: {settings.describe()}")
        if now - start < settings.window_seconds:
            return None
        return f"idle for {settings.idle_minutes:g} minutes since {_iso(start)}", settings

    def run(self, until: Callable[[], bool] = lambda: False) -> list[str]:
        """Check until the cluster is stopped (or `until()`); the nodes stopped, in order (a
        spend cap's `stop_workers`, which leaves the head up, is not an end)."""
        stopped: list[str] = []
        while not until():
            self.end_check()
            capped = self.spend_check()
            if capped is not None:
                stop, settings, nodes = capped
                if not stop.keep_head:
                    self._report(STATUS_ATTRIBUTE, f"spend-capped:{_iso(self.clock())}:"
                                                   f"{stop.action}:{stop.reason}")
                try:
                    stopped += stop_cluster(self.cloud, settings, stop, self.clock, nodes)
                    if not stop.keep_head:
                        return stopped
                except ApiError as exc:  # still over the cap at the next check: again then
                    log(f"could not stop the cluster ({exc}): trying again at the next check")
            decision = self.check()
            if decision is not None:
                reason, settings = decision
                stop = Stop(reason, settings.down)
                self._report(STATUS_ATTRIBUTE, f"autostopped:{_iso(self.clock())}:"
                                               f"{stop.action}:idle {settings.idle_minutes:g} min")
                try:
                    return stopped + stop_cluster(self.cloud, settings, stop, self.clock)
                except ApiError as exc:  # still idle at the next check: it tries again then
                    log(f"could not stop the cluster ({exc}): trying again at the next check")
            time.sleep(self.poll_seconds)
        return stopped


def _money(amount: float | None) -> str:
    return "none" if amount is None else f"${amount:.2f}"


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True, help="the head's home (the override's place)")
    args = parser.parse_args(argv)
    metadata = Metadata.from_environment()
    daemon = Autostop(
        metadata, Path(args.home),
        RayState(os.environ.get("RAY_BOOTSTRAP_DASHBOARD_URL") or "http://127.0.0.1:8265",
                 os.environ.get("RAY_AUTH_TOKEN_PATH") or ""),
        Cloud.from_environment(metadata),
        Path(os.environ.get("RAY_BOOTSTRAP_PROC_DIR") or "/proc"),
        float(os.environ.get("RAY_BOOTSTRAP_AUTOSTOP_POLL") or DEFAULT_POLL_SECONDS))
    log(f"pid={os.getpid()} watches the cluster (metadata {SETTINGS_KEY}, "
        f"{Path(args.home) / OVERRIDE_FILE})")
    daemon.run()
    log("the cluster is stopping: this daemon ends")
    return 0


if __name__ == "__main__":
    sys.exit(main())
