"""The whole Ray cluster YAML as one validated model: the single source of truth for config.

Defaults are merged the way Ray merges them (a top-level key given by the user replaces the
default whole), short GCP names are normalised to URL forms, and cross-field rules are checked
with errors that name the YAML path and the fix.
"""

from __future__ import annotations

import copy
import functools
import importlib.metadata
import ipaddress
import json
import math
import re
import shlex
import unicodedata
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from model.config.capacity import Capacity
from model.config.catalog import Findings, region_problem, zone_problem
from model.config.catalog_checks import check_cluster
from model.config.errors import PathError
from model.config.head_instance import head_unsupported
from model.config.local_paths import expand_local_path
from model.config.node_config import ComputeNodeConfig, NodeConfig, TpuNodeConfig
from model.config.private import (
    IAP_PROXY_COMMAND,
    IAP_SOURCE_RANGE,
    OsLogin,
    PrivateCluster,
    covers_everything,
    proxy_template_problem,
)
from model.config.ray_merge import fill_like_ray
from model.config.urls import (
    accelerator_type_url,
    disk_type_url,
    machine_type_url,
    service_account_email,
    tpu_network_path,
    tpu_subnetwork_path,
)
from model.yaml_text import load_shipped_yaml

DEFAULTS_FILE = Path(__file__).with_name("gcp_defaults.yaml")
AUTOSCALER_ACCOUNT_ID = "ray-autoscaler-sa-v1"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# Far above any cluster GCE quotas allow; a bound keeps a typo'd count from planning 2**70 nodes.
MAX_NODES = 10_000

# GCE names: lowercase letter first, then letters, digits, hyphens; 63 characters at most.
# `ray-<cluster>-worker-<8 hex>-compute` must fit, which leaves 35 for the cluster name.
_CLUSTER_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,33}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{1,63}$")


def _expandable(value: str) -> str:
    expand_local_path(value)
    return value


# A path on the user's machine, kept as written; its `~user` must exist here.
LocalPath = Annotated[str, AfterValidator(_expandable)]


class StrictModel(BaseModel):
    # No inf or nan: a node cannot start with `--resources {"CPU": NaN}`.
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)


class GcpCredentials(StrictModel):
    """`provider.gcp_credentials`: a service-account JSON or an OAuth token, kept secret.

    A service-account key is what Google's client libraries read
    (`service_account.Credentials.from_service_account_info`): a JSON object whose values are
    all strings. It may be given as that JSON text or as a YAML mapping; either way it is
    checked for that shape here, so nothing later meets a date or a nested list in it."""

    type: Literal["service_account", "credentials_token"]
    credentials: SecretStr

    @field_validator("credentials", mode="before")
    @classmethod
    def _json_text(cls, value: Any) -> Any:
        """YAML users may write the service-account JSON as a mapping: keep it as JSON text."""
        if not isinstance(value, dict):
            return value
        problem = _non_string_entries(value)
        if problem:
            raise ValueError(f"formatted improperly ({problem}): paste the service-account "
                             "key JSON downloaded from IAM")
        return json.dumps(value)

    @model_validator(mode="after")
    def _well_formed(self) -> GcpCredentials:
        if self.type != "service_account":
            if not self.credentials.get_secret_value().strip():
                raise PathError([("credentials", "the OAuth token is empty: paste the token")])
            return self
        info = _json_object(self.credentials.get_secret_value())
        what = "it is not a JSON object" if info is None else _non_string_entries(info)
        if not what:
            missing = [k for k in ("client_email", "private_key") if not info.get(k)]
            what = f"it lacks {', '.join(missing)}" if missing else ""
        if what:
            raise PathError(
                [
                    (
                        "credentials",
                        "gcp_credentials found in cluster yaml file but formatted improperly "
                        f"({what}): paste the whole service-account key JSON downloaded from IAM",
                    )
                ]
            )
        return self

    def service_account_info(self) -> dict[str, Any] | None:
        if self.type != "service_account":
            return None
        return json.loads(self.credentials.get_secret_value())


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in `text`, or None for anything else (bad JSON, nesting past the
    parser's depth, a list)."""
    try:
        info = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return info if isinstance(info, dict) else None


def _non_string_entries(info: dict[Any, Any]) -> str:
    """What keeps `info` from being a JSON object of strings, naming keys but never values
    (they are secret); empty when it is one."""
    wrong = [str(key).encode("utf-8", "backslashreplace").decode()
             for key, value in info.items()
             if not isinstance(key, str) or not isinstance(value, str)]
    if not wrong:
        return ""
    return (f"{', '.join(sorted(wrong)[:5])}: not a string, where every key and value of a "
            "service-account key is one; quote it as the JSON file does")


class Autostop(StrictModel):
    """`provider.autostop`: the head stops (`down: true`: deletes) every node of the cluster
    once it has been idle for `idle_minutes` (bootstrap/autostop.py says what idle means)."""

    idle_minutes: int = Field(ge=1)
    down: bool = False


class SpendCap(StrictModel):
    """`provider.spend_cap`: what the cluster may cost, priced from the project's price table.

    `max_usd_per_hour`: the head refuses autoscaler launches that would take the cluster's
    hourly price over it, and a plan whose pinned nodes alone cost more is refused.
    `max_usd_total`: once the cluster has cost this much since its nodes were created, the head
    takes `action`: `stop_workers` stops every worker (the head stays up to be asked why),
    `down` stops the whole cluster as autostop does."""

    max_usd_per_hour: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_usd_total: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    action: Literal["stop_workers", "down"] = "stop_workers"

    @field_validator("action", mode="before")
    @classmethod
    def _action_word(cls, value: Any) -> Any:
        if value not in ("stop_workers", "down"):
            raise ValueError(
                f"{value!r} is not an action: write stop_workers (the head stays up) or down "
                "(every node stops), or leave it out for stop_workers"
            )
        return value

    @model_validator(mode="after")
    def _some_cap(self) -> SpendCap:
        if self.max_usd_per_hour is None and self.max_usd_total is None:
            raise ValueError(
                "set max_usd_per_hour, max_usd_total or both (US dollars), or leave "
                "provider.spend_cap out"
            )
        return self


class TpuQueuedResources(StrictModel):
    """`provider.tpu_queued_resources`: TPU worker slices are requested through the TPU
    queued-resources API (they wait in GCP's queue for capacity) instead of created outright.

    `wait_minutes` bounds how long one `up` waits for a slice to be ACTIVE; the request stays
    queued past it and the next `up` waits for the same request. `valid_until_minutes` lets
    GCP drop a request it has not filled by then (the API's `validUntilDuration`)."""

    wait_minutes: int = Field(ge=1, le=7 * 24 * 60)
    valid_until_minutes: int | None = Field(default=None, ge=1)


# `ray up` starts the head with autoscaler v2 since Ray 2.50 (RAY_UP_enable_autoscaler_v2 in
# ray/autoscaler/_private/commands.py defaults to on from then).
RAY_UP_V2_SINCE = (2, 50)


@functools.cache
def ray_up_autoscaler_version() -> Literal["v1", "v2"]:
    """The autoscaler `ray up` of the installed Ray starts on a head: v2 from Ray 2.50. Read
    once a process: the installed distribution's metadata was a fifth of a config's parse."""
    release = re.match(r"(\d+)\.(\d+)", importlib.metadata.version("ray"))
    installed = (int(release.group(1)), int(release.group(2))) if release else (0, 0)
    return "v2" if installed >= RAY_UP_V2_SINCE else "v1"


class Provider(StrictModel):
    type: Literal["gcp"]
    region: str
    availability_zone: str
    project_id: str | None = None
    gcp_credentials: GcpCredentials | None = None
    cache_stopped_nodes: bool = False
    autostop: Autostop | None = None
    spend_cap: SpendCap | None = None
    """What the cluster may cost per hour and in total; see SpendCap."""
    use_internal_ips: bool = False
    """Ray's meaning: the tasks and the autoscaler dial nodes' internal addresses (the laptop
    is inside the VPC); here it also leaves nodes without an external IP."""
    private_cluster: PrivateCluster | None = None
    """No node has a public address: SSH only from IAP's range (35.235.240.0/20) and through
    an IAP tunnel, Ray's ports internal, egress through a Cloud NAT (model/config/private.py)."""
    ssh_proxy_command: str | None = None
    """How the tasks reach the head: a ProxyCommand template ({instance}, {zone}, {project},
    {host}, {port}, {user}); in private mode it defaults to `gcloud compute start-iap-tunnel`."""
    os_login: OsLogin | None = None
    """Logins through OS Login instead of `ssh-keys` metadata (model/config/private.py)."""
    ssh_source_ranges: list[str] | None = None
    """Who may open SSH to the head: default IAP's range in private mode, else 0.0.0.0/0."""
    inline_secret_file_mounts: bool = False
    """Accepted for YAMLs written for older versions and ignored (see the model's warnings):
    every file mount travels in the cluster's private bucket."""
    fallback_zones: list[str] | Literal[False] | None = None
    """Where workers go when availability_zone is out of capacity: absent, any zone of the
    region offering the types; a list, only those zones in that order; false, nowhere."""
    capacity: dict[str, Capacity] | None = None
    """Node type -> its capacity policy (spot with on-demand fallback); see Capacity. Under
    `provider`, not in the node type, because Ray's schema refuses unknown node type keys."""
    tpu_queued_resources: TpuQueuedResources | None = None
    """Absent: each TPU worker slice is a `tpu.V2Vm`; set: a queued resource (see above)."""
    autoscaler_version: Literal["v1", "v2"] = Field(default_factory=ray_up_autoscaler_version)
    """Which of Ray's autoscalers the head runs: absent, the one `ray up` of the installed Ray
    starts (v2 since Ray 2.50); `v1` or `v2` forces it."""
    ray_token_auth: bool = True
    """Ray's token authentication (`RAY_AUTH_MODE=token`) on every node: a random token per
    stack in Secret Manager, read by the nodes at boot. `false` turns it off (the plan warns):
    then anyone who reaches the head's GCS or dashboard port can run jobs on the cluster."""

    @field_validator("fallback_zones", mode="before")
    @classmethod
    def _fallback_form(cls, value: Any) -> Any:
        if value is True or not isinstance(value, list | None | bool):
            raise ValueError(
                "use a list of zones of the region (e.g. [us-west1-b, us-west1-c]), false to "
                "turn zone failover off, or leave it out for every zone of the region"
            )
        return value

    @field_validator("autoscaler_version", mode="before")
    @classmethod
    def _version_form(cls, value: Any) -> Any:
        if value not in ("v1", "v2"):
            raise ValueError(
                f"{value!r} is not an autoscaler version: write v1 or v2, or leave it out for "
                "the one `ray up` of the installed Ray starts (v2 since Ray 2.50)"
            )
        return value

    @field_validator("capacity", mode="before")
    @classmethod
    def _capacity_form(cls, value: Any) -> Any:
        if value is None:
            return value
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise ValueError(
                "use a mapping of worker node types to policies, e.g. "
                "{gpu_worker: {fallback: on-demand}}, or leave it out"
            )
        return value

    @field_validator("tpu_queued_resources", mode="before")
    @classmethod
    def _queued_form(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise ValueError(
                "use a mapping such as {wait_minutes: 30} (how long `up` waits for each TPU "
                "slice's queued request), or leave it out to create TPU slices outright"
            )
        return value

    @model_validator(mode="after")
    def _fallback_zones_in_region(self) -> Provider:
        zones = self.fallback_zones or []
        problems = [
            (
                f"fallback_zones[{index}]",
                f"zone {zone!r} is not in region {self.region!r}: "
                f"list zones such as {self.region}-b",
            )
            for index, zone in enumerate(zones)
            if not zone.startswith(f"{self.region}-")
        ]
        problems += [
            (f"fallback_zones[{index}]", f"zone {zone!r} is listed twice: list it once")
            for index, zone in enumerate(zones)
            if zone in zones[:index]
        ]
        if problems:
            raise PathError(problems)
        return self

    @field_validator("private_cluster", mode="before")
    @classmethod
    def _private_form(cls, value: Any) -> Any:
        """`private_cluster: true` is the mapping with every default; `false` is off."""
        if value is True:
            return {}
        if value is False:
            return None
        return value

    @field_validator("ssh_proxy_command")
    @classmethod
    def _proxy_template(cls, value: str | None) -> str | None:
        problem = proxy_template_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _ssh_defaults(self) -> Provider:
        if self.ssh_source_ranges is None:
            self.ssh_source_ranges = [IAP_SOURCE_RANGE] if self.private_cluster else ["0.0.0.0/0"]
        return self

    @property
    def proxy_command(self) -> str | None:
        """The ProxyCommand template the tasks use: the YAML's, else IAP's in private mode,
        unless `use_internal_ips` says the laptop is inside the VPC (then: dialled directly)."""
        if self.ssh_proxy_command is not None:
            return self.ssh_proxy_command
        return IAP_PROXY_COMMAND if self.private_cluster and not self.use_internal_ips else None

    @property
    def os_login_account(self) -> str:
        """Whose OS Login profile the tasks add the stack's key to: the principal's email when
        it is one account (`user:`, `serviceAccount:`), else "" (the tasks ask for it)."""
        if self.os_login is None:
            return ""
        kind, _, email = self.os_login.principal.partition(":")
        return email if kind in ("user", "serviceAccount") else ""

    @property
    def ssh_ranges(self) -> list[str]:
        return list(self.ssh_source_ranges or [])

    @field_validator("ssh_source_ranges")
    @classmethod
    def _cidrs(cls, ranges: list[str] | None) -> list[str] | None:
        if ranges is None:
            return ranges
        if not ranges:
            raise ValueError(
                "an empty list leaves the SSH firewall rule without a source: list the ranges "
                "that may reach the head, e.g. [203.0.113.0/24] (or [0.0.0.0/0] for anywhere)"
            )
        for cidr in ranges:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ValueError(f"{cidr!r} is not a CIDR range such as 203.0.113.0/24") from None
        return ranges

    @model_validator(mode="after")
    def _project_and_zone(self) -> Provider:
        problems = []
        if not self.project_id:
            problems.append(
                (
                    "project_id",
                    "project_id must be set in the provider section: set it to your GCP project id",
                )
            )
        wrong_region = region_problem(self.region)
        if wrong_region:
            problems.append(("region", wrong_region))
        elif wrong_zone := zone_problem(self.availability_zone, self.region):
            problems.append(("availability_zone", wrong_zone))
        if problems:
            raise PathError(problems)
        return self

    def capacity_input(self, node_type: str) -> dict[str, Any] | None:
        """The WorkerGroup's `capacity` input for a node type: its policy, or None."""
        policy = (self.capacity or {}).get(node_type)
        return policy.as_input() if policy else None

    @property
    def project(self) -> str:
        return self.project_id or ""


class Auth(StrictModel):
    ssh_user: str = "ubuntu"
    ssh_private_key: str | None = None
    ssh_public_key: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_proxy(cls, data: Any) -> Any:
        """Ray's schema takes an SSH ProxyCommand; our tasks connect directly (paramiko)."""
        if not isinstance(data, dict):
            return data
        used = [key for key in ("ssh_proxy_command", "ssh_proxy_use_node_id") if data.get(key)]
        if used:
            raise PathError(
                [(key, "the invoke tasks read their tunnel from provider.ssh_proxy_command "
                       f"(placeholders such as {{instance}}, {{host}}, {{port}}): move it there "
                       f"and remove {key}")
                 for key in used]
            )
        return {k: v for k, v in data.items() if k != "ssh_proxy_use_node_id"}

    _key_files = field_validator("ssh_private_key", "ssh_public_key")(
        classmethod(lambda cls, value: _not_an_empty_file(value))
    )

    @field_validator("ssh_user")
    @classmethod
    def _posix_user(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", value):
            raise ValueError(f"{value!r} is not a Linux user name: use e.g. ubuntu")
        return value


class Docker(StrictModel):
    image: str = ""
    head_image: str | None = None
    worker_image: str | None = None
    container_name: str = "ray_container"
    pull_before_run: bool = True
    run_options: list[str] = Field(default_factory=list)
    head_run_options: list[str] = Field(default_factory=list)
    worker_run_options: list[str] = Field(default_factory=list)
    disable_automatic_runtime_detection: bool = False
    disable_shm_size_detection: bool = False
    use_podman: bool = False

    @model_validator(mode="before")
    @classmethod
    def _image_with_container(cls, data: Any) -> Any:
        """Ray's `validate_docker_config`: an image needs a container name and vice versa."""
        if not isinstance(data, dict):
            return data
        image = data.get("image")
        head, worker = data.get("head_image", image), data.get("worker_image", image)
        has_image = bool(image or (head and worker))
        has_name = bool(data.get("container_name"))
        if has_image and not has_name:
            raise PathError([("container_name", "Ray needs a container name with an image: "
                                                "add container_name: ray_container")])
        if has_name and not has_image:
            raise PathError([("image", "a container needs an image: set image (or both "
                                       "head_image and worker_image), or remove docker")])
        if not has_image and (head or worker):
            raise PathError([("image", "set image, or both head_image and worker_image")])
        if data.get("use_podman"):
            raise PathError([("use_podman", "the node scripts run docker, not podman: remove "
                                            "use_podman")])
        return data

    _run_option_words = field_validator("run_options", "head_run_options", "worker_run_options")(
        classmethod(lambda cls, value: _shell_words(value))
    )

    @property
    def enabled(self) -> bool:
        return bool(self.image or self.head_image or self.worker_image)

    def image_for(self, role: Literal["head", "worker"]) -> str:
        specific = self.head_image if role == "head" else self.worker_image
        return specific or self.image

    def run_options_for(self, role: Literal["head", "worker"]) -> list[str]:
        specific = self.head_run_options if role == "head" else self.worker_run_options
        return [*self.run_options, *specific]


class NodeTypeDocker(StrictModel):
    """Per-node-type docker overrides Ray accepts under `available_node_types.<t>.docker`."""

    worker_image: str | None = None
    pull_before_run: bool | None = None
    worker_run_options: list[str] | None = None

    _run_option_words = field_validator("worker_run_options")(
        classmethod(lambda cls, value: _shell_words(value))
    )


class NodeType(StrictModel):
    # Required, whole numbers: Ray's schema refuses a node type without them (GCP does not
    # detect an instance's resources); `{}` is allowed.
    resources: dict[str, int]
    min_workers: int = Field(default=0, ge=0, le=MAX_NODES)
    max_workers: int | None = Field(default=None, ge=0, le=MAX_NODES)

    _counts = field_validator("min_workers", "max_workers", mode="before")(
        classmethod(lambda cls, value: _not_a_bool(value))
    )

    @field_validator("resources", mode="before")
    @classmethod
    def _resource_amounts(cls, resources: Any) -> Any:
        """Ray resources are amounts: a finite number, zero or more (YAML's `true`, `-1`
        and `.nan` all parse as numbers)."""
        if isinstance(resources, dict):
            problems = [
                (str(name), f"{amount!r} is not an amount: use a number of 0 or more, "
                            "e.g. CPU: 4")
                for name, amount in resources.items()
                if isinstance(amount, bool)
                or not isinstance(amount, int | float)
                or not math.isfinite(amount)
                or amount < 0
            ]
            if problems:
                raise PathError(problems)
        return resources
    node_config: NodeConfig
    labels: dict[str, str] = Field(default_factory=dict)
    # Ray's per-type overrides: on this type's workers they replace the cluster's lists whole.
    initialization_commands: list[str] | None = None
    worker_setup_commands: list[str] | None = None
    docker: NodeTypeDocker | None = None
    # Read by Ray's autoscaler on the head only (carried in its config).
    idle_timeout_s: float | None = None
    priority: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _resources_given(cls, data: Any) -> Any:
        if isinstance(data, dict) and "resources" not in data:
            raise PathError([("resources", "Ray requires the resources of every node type: "
                                           "add e.g. resources: {CPU: 2} ({} is allowed)")])
        return data

    @property
    def is_tpu(self) -> bool:
        return isinstance(self.node_config, TpuNodeConfig)


class ClusterConfig(StrictModel):
    """A Ray cluster YAML for GCP, defaults filled in and short names normalised."""

    cluster_name: str = "default"
    max_workers: int = Field(default=2, ge=0, le=MAX_NODES)
    # Ray's schema allows 0, which its autoscaler reads as the default 1.0.
    upscaling_speed: float = Field(default=1.0, ge=0)
    idle_timeout_minutes: float = Field(default=5, ge=0)

    _numbers = field_validator(
        "max_workers", "upscaling_speed", "idle_timeout_minutes", mode="before"
    )(classmethod(lambda cls, value: _not_a_bool(value)))
    docker: Docker = Field(default_factory=Docker)
    provider: Provider
    auth: Auth = Field(default_factory=Auth)
    available_node_types: dict[str, NodeType]
    head_node_type: str
    file_mounts: dict[str, LocalPath] = Field(default_factory=dict)
    cluster_synced_files: list[str] = Field(default_factory=list)
    file_mounts_sync_continuously: bool = False
    rsync_exclude: list[str] = Field(default_factory=list)
    rsync_filter: list[str] = Field(default_factory=list)
    initialization_commands: list[str] = Field(default_factory=list)
    setup_commands: list[str] = Field(default_factory=list)
    head_setup_commands: list[str] = Field(default_factory=list)
    worker_setup_commands: list[str] = Field(default_factory=list)
    head_start_ray_commands: list[str] = Field(default_factory=list)
    worker_start_ray_commands: list[str] = Field(default_factory=list)

    # Ray's schema lets users keep their own data here; Ray does not read it, nor do we.
    metadata: dict[str, Any] = Field(default_factory=dict)

    _warnings: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _fill_defaults(cls, data: Any, handler: ModelWrapValidatorHandler) -> ClusterConfig:
        """Ray's merge: every top-level key the YAML leaves out comes from the GCP defaults,
        and the keys Ray drops are dropped here too, each with a warning."""
        if isinstance(data, ClusterConfig):
            return handler(data)
        if not isinstance(data, dict):
            raise ValueError("a cluster YAML must be a mapping of keys such as cluster_name")
        merged, warnings, refusals = fill_like_ray(data, gcp_defaults(), Provider.model_fields)
        if refusals:
            raise PathError(refusals)
        config = handler(merged)
        if config.provider.tpu_queued_resources and not any(
            t.is_tpu for t in config.worker_types.values()
        ):
            warnings.append(
                "provider.tpu_queued_resources: no worker type is a TPU, so nothing is queued: "
                "remove it or add a TPU worker type"
            )
        if "inline_secret_file_mounts" in config.provider.model_fields_set:
            warnings.append(
                "provider.inline_secret_file_mounts: no longer used, ignored: every file mount, "
                "key-like files included, travels in the cluster's private bucket; remove it"
            )
        config._warnings = warnings
        return config

    def _catalog_findings(self) -> Findings:
        """Names Google Cloud does not have (errors) or the catalog does not list (warnings)."""
        return check_cluster(
            self.provider.region, self.provider.availability_zone,
            self.provider.fallback_zones or [],
            {name: t.node_config for name, t in self.available_node_types.items()},
        )

    @property
    def warnings(self) -> list[str]:
        """Keys Ray would drop from this YAML (legacy, unused provider keys): one line each."""
        return list(self._warnings)

    @property
    def review_warnings(self) -> list[str]:
        """What a reviewer of the plan should see: names missing from the shipped catalog
        (model/config/catalog.yaml), SSH open to every address, Ray's token authentication
        turned off."""
        warnings = [f"{path}: {message}" for path, message in self._catalog_findings().warnings]
        whole = covers_everything(self.provider.ssh_ranges)
        if whole is not None:
            given = ", ".join(self.provider.ssh_ranges)
            shown = whole if given == whole else f"{given} together cover {whole}"
            warnings.append(
                f"provider.ssh_source_ranges: SSH to the head is open to the whole internet "
                f"({shown}): list your own ranges, or set "
                "provider.private_cluster: true (SSH through IAP only, no public IPs)"
            )
        if not self.provider.ray_token_auth:
            warnings.append(
                "provider.ray_token_auth: false: Ray's token authentication is off, so anyone "
                "who reaches the head's GCS or dashboard port can run jobs as the nodes' "
                "service account: remove the key to turn it back on"
            )
        return warnings

    @field_validator("cluster_name")
    @classmethod
    def _gce_name(cls, value: str) -> str:
        if not _CLUSTER_NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} cannot prefix GCE names: use 1-35 lowercase letters, digits or "
                "hyphens, starting with a letter (e.g. my-cluster)"
            )
        return value

    @field_validator("file_mounts")
    @classmethod
    def _mount_targets(cls, mounts: dict[str, str]) -> dict[str, str]:
        """A remote path is one line of the node's data (a newline would add a docker `-v`
        bind mount) and a name on the node: no control character."""
        problems = [
            (
                repr(target)[1:-1],
                "a file_mounts target holds a control character (newline, tab, ...): "
                "write the remote path without it",
            )
            for target in mounts
            if any(unicodedata.category(char) == "Cc" for char in target)
        ]
        if problems:
            raise PathError(problems)
        return mounts

    @field_validator("available_node_types")
    @classmethod
    def _type_names(cls, types: dict[str, NodeType]) -> dict[str, NodeType]:
        problems = [
            (
                name,
                "node type names become GCE label values: use lowercase letters, "
                "digits, '_' or '-' (63 at most)",
            )
            for name in types
            if not _LABEL_VALUE.fullmatch(name)
        ]
        if not types:
            raise ValueError("declare at least the head's node type")
        if problems:
            raise PathError(problems)
        return types

    @model_validator(mode="after")
    def _cross_field_rules(self) -> ClusterConfig:
        problems: list[tuple[str, str]] = []
        if self.head_node_type not in self.available_node_types:
            problems.append(
                (
                    "head_node_type",
                    f"{self.head_node_type!r} is not a key of available_node_types: use one "
                    f"of {', '.join(sorted(self.available_node_types))}",
                )
            )
        for name, node_type in self.available_node_types.items():
            if node_type.max_workers is None:
                # Ray: the head's type adds no workers unless told; others share the cap.
                node_type.max_workers = 0 if name == self.head_node_type else self.max_workers
            path = f"available_node_types.{name}"
            if node_type.min_workers > node_type.max_workers:
                problems.append(
                    (
                        f"{path}.min_workers",
                        f"min_workers ({node_type.min_workers}) "
                        f"exceeds max_workers ({node_type.max_workers}): lower it or "
                        "raise max_workers",
                    )
                )
            config = node_type.node_config
            if (
                isinstance(config, ComputeNodeConfig)
                and config.has_gpu
                and (config.scheduling.on_host_maintenance != "TERMINATE")
            ):
                problems.append(
                    (
                        f"{path}.node_config.scheduling",
                        "GPU instances cannot live-"
                        "migrate: set scheduling.onHostMaintenance: TERMINATE",
                    )
                )
        problems += self._capacity_problems()
        if self.head_node_type in self.available_node_types:
            problems += self._head_problems()
        if self.provider.private_cluster:
            problems += self._public_address_problems()
        if self.provider.os_login:
            problems += self._os_login_problems()
        total_min = sum(t.min_workers for t in self.available_node_types.values())
        if total_min > self.max_workers:
            problems.append(
                (
                    "max_workers",
                    f"the node types' min_workers add up to {total_min}, "
                    f"more than max_workers ({self.max_workers}): raise max_workers or "
                    "lower a min_workers",
                )
            )
        problems += self._catalog_findings().errors
        if problems:
            raise PathError(problems)
        self._normalise_urls()
        return self

    def _normalise_urls(self) -> None:
        zone, project = self.provider.availability_zone, self.provider.project
        for node_type in self.available_node_types.values():
            config = node_type.node_config
            if isinstance(config, TpuNodeConfig):
                self._normalise_tpu_network(config)
                continue
            config.machine_type = machine_type_url(zone, config.machine_type)
            for accelerator in config.guest_accelerators:
                accelerator.accelerator_type = accelerator_type_url(
                    project, zone, accelerator.accelerator_type
                )
            for disk in config.disks:
                params = disk.initialize_params
                if params is not None and params.disk_type:
                    params.disk_type = disk_type_url(zone, params.disk_type)

    def _capacity_problems(self) -> list[tuple[str, str]]:
        """`provider.capacity` names worker types; the short form a spot one; a ladder's
        zones are the region's."""
        problems = []
        for name, policy in (self.provider.capacity or {}).items():
            path = f"provider.capacity.{name}"
            node_type = self.available_node_types.get(name)
            if node_type is None:
                problems.append((path, f"{name!r} is not a key of available_node_types: use "
                                       f"one of {', '.join(sorted(self.available_node_types))}"))
            elif isinstance(node_type.node_config, TpuNodeConfig):
                problems += self._tpu_ladder_problems(path, name, policy)
            elif not node_type.max_workers and name == self.head_node_type:
                problems.append((path, "the head is never created on-demand in its stead and "
                                       f"{name} has no workers: remove it from "
                                       "provider.capacity"))
            elif policy.is_ladder:
                problems += self._ladder_problems(path, policy)
            elif not node_type.node_config.scheduling.is_preemptible:
                problems.append((path, f"{name}'s node_config is on-demand already: set "
                                       f"available_node_types.{name}.node_config.scheduling."
                                       "provisioningModel: SPOT, or remove it from "
                                       "provider.capacity"))
        return problems

    def _tpu_ladder_problems(self, path: str, name: str,
                             policy: Capacity) -> list[tuple[str, str]]:
        """A TPU slice walks a ladder only as queued requests, in its zone, on the markets the
        TPU API has (no flex-start tier in its v2 API)."""
        if not policy.is_ladder or self.provider.tpu_queued_resources is None:
            return [(path, f"a TPU type walks a capacity ladder through queued resources: set "
                           "provider.tpu_queued_resources (e.g. {wait_minutes: 30}) and write "
                           f"a `ladder:`, or remove {name} from provider.capacity")]
        problems = []
        for index, rung in enumerate(policy.ladder or []):
            where = f"{path}.ladder[{index}]"
            if rung.market not in ("reservation", "any-reservation", "spot", "on-demand"):
                problems.append((f"{where}.market", f"a TPU slice has no {rung.market} rung: "
                                 "use reservation, any-reservation, spot or on-demand"))
            if rung.zones or rung.machine_type:
                problems.append((where, "a TPU slice stays in availability_zone with its "
                                        "accelerator type: remove zones and machine_type"))
        return problems

    def _ladder_problems(self, path: str, policy: Capacity) -> list[tuple[str, str]]:
        """Every rung's zones are zones of the provider's region."""
        problems = []
        for index, rung in enumerate(policy.ladder or []):
            for zone in rung.zones or []:
                if wrong := zone_problem(zone, self.provider.region):
                    problems.append((f"{path}.ladder[{index}].zones", wrong))
        return problems

    def _head_problems(self) -> list[tuple[str, str]]:
        """Fields GCE takes that pulumi-gcp's compute.Instance cannot express (a worker type
        takes them: its body goes to the API as written)."""
        config = self.head_type.node_config
        if not isinstance(config, ComputeNodeConfig):
            return []
        found = head_unsupported(config.body())
        path = f"available_node_types.{self.head_node_type}.node_config"
        return [
            (
                f"{path}.{field}",
                f"{why}, so the head cannot have it: remove it from the head's type "
                "(worker types take it)",
            )
            for field, why in found
        ]

    def _public_address_problems(self) -> list[tuple[str, str]]:
        """A node_config that asks for an external IP contradicts private mode."""
        fix = "remove it: provider.private_cluster gives no node a public address"
        problems = []
        for name, node_type in self.available_node_types.items():
            path = f"available_node_types.{name}.node_config"
            config = node_type.node_config
            if isinstance(config, TpuNodeConfig):
                if config.network_config and config.network_config.enable_external_ips:
                    problems.append((f"{path}.networkConfig.enableExternalIps", f"true: {fix}"))
                continue
            for index, interface in enumerate(config.network_interfaces or []):
                for key, given in (("accessConfigs", interface.access_configs),
                                   ("ipv6AccessConfigs", interface.ipv6_access_configs)):
                    if given:
                        problems.append((f"{path}.networkInterfaces[{index}].{key}",
                                         f"an external address: {fix}"))
        return problems

    def _os_login_problems(self) -> list[tuple[str, str]]:
        """OS Login ignores `ssh-keys`, and a node cannot turn it off and on at once."""
        problems = []
        for name, node_type in self.available_node_types.items():
            path = f"available_node_types.{name}.node_config.metadata"
            metadata = node_type.node_config.metadata
            if "ssh-keys" in metadata:
                problems.append((f"{path}.ssh-keys", "OS Login ignores ssh-keys metadata: "
                                 "remove it (provider.os_login registers your key instead)"))
            if metadata.get("enable-oslogin", "TRUE").upper() != "TRUE":
                problems.append((f"{path}.enable-oslogin", "provider.os_login turns OS Login "
                                 "on for every node: remove it, or remove provider.os_login"))
        return problems

    def _normalise_tpu_network(self, config: TpuNodeConfig) -> None:
        network, project = config.network_config, self.provider.project
        if network is None:
            return
        if network.network:
            network.network = tpu_network_path(project, network.network)
        if network.subnetwork:
            network.subnetwork = tpu_subnetwork_path(
                project, self.provider.region, network.subnetwork
            )

    # -------------------------------------------------------------- derived views

    @property
    def head_type(self) -> NodeType:
        return self.available_node_types[self.head_node_type]

    @property
    def worker_types(self) -> dict[str, NodeType]:
        """Every type that may run workers: all but the head's, plus the head's if it allows."""
        return {
            name: t
            for name, t in self.available_node_types.items()
            if name != self.head_node_type or (t.max_workers or 0) > 0
        }

    @property
    def has_tpu(self) -> bool:
        return any(t.is_tpu for t in self.available_node_types.values())

    @property
    def autoscaler_service_account_email(self) -> str:
        return service_account_email(AUTOSCALER_ACCOUNT_ID, self.provider.project)

    @property
    def uses_explicit_network(self) -> bool:
        """Ray uses the YAML's networkInterfaces only when every compute type gives them."""
        computes = [
            t.node_config
            for t in self.available_node_types.values()
            if isinstance(t.node_config, ComputeNodeConfig)
        ]
        return bool(computes) and all(c.network_interfaces for c in computes)

    def setup_commands_for(self, role: Literal["head", "worker"], node_type: str) -> list[str]:
        """`setup_commands` then the role's own, as Ray's `merge_setup_commands` orders them.
        A type's own `worker_setup_commands` replace both on its workers (Ray's schema: it
        "will override the global setup_commands and worker_setup_commands")."""
        if role == "head":
            return [*self.setup_commands, *self.head_setup_commands]
        own = self.available_node_types[node_type].worker_setup_commands
        return list(own) if own is not None else [*self.setup_commands, *self.worker_setup_commands]

    def initialization_commands_for(
        self, role: Literal["head", "worker"], node_type: str
    ) -> list[str]:
        """The cluster's `initialization_commands`, or on a worker its type's own list."""
        own = self.available_node_types[node_type].initialization_commands
        if role == "worker" and own is not None:
            return list(own)
        return list(self.initialization_commands)

    def docker_image_for(self, role: Literal["head", "worker"], node_type: str) -> str:
        """The image a node runs: the type's own `docker.worker_image` wins on a worker (Ray
        applies per-type docker settings to workers only), then the role's, then `image`."""
        own = self._type_docker(role, node_type)
        return (own.worker_image if own else None) or self.docker.image_for(role)

    def docker_run_options_for(self, role: Literal["head", "worker"], node_type: str) -> list[str]:
        """`run_options` plus the role's own; a type's `worker_run_options` replaces the
        cluster's `worker_run_options` on its workers."""
        own = self._type_docker(role, node_type)
        if own is not None and own.worker_run_options is not None:
            return [*self.docker.run_options, *own.worker_run_options]
        return self.docker.run_options_for(role)

    def docker_pull_before_run_for(self, role: Literal["head", "worker"], node_type: str) -> bool:
        own = self._type_docker(role, node_type)
        if own is not None and own.pull_before_run is not None:
            return own.pull_before_run
        return self.docker.pull_before_run

    def _type_docker(
        self, role: Literal["head", "worker"], node_type: str
    ) -> NodeTypeDocker | None:
        return self.available_node_types[node_type].docker if role == "worker" else None

    def start_commands_for(self, role: Literal["head", "worker"]) -> list[str]:
        return list(
            self.head_start_ray_commands if role == "head" else self.worker_start_ray_commands
        )

    def ray_dict(self) -> dict[str, Any]:
        """The config as Ray reads it: YAML key names, URLs normalised, secrets left out."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        if not self.docker.enabled:
            # Ray treats a container_name without an image as a broken docker config.
            data["docker"] = {}
        data["provider"].pop("gcp_credentials", None)
        for ours in ("ssh_source_ranges", "private_cluster", "ssh_proxy_command", "os_login"):
            data["provider"].pop(ours, None)  # our network and tunnels, not Ray's
        data["provider"].pop("inline_secret_file_mounts", None)
        data["provider"].pop("autostop", None)  # the head's daemon reads it, not Ray
        data["provider"].pop("spend_cap", None)  # the head enforces it, not Ray
        data["provider"].pop("tpu_queued_resources", None)  # our TPU slices, not Ray's
        data["provider"].pop("capacity", None)  # our worker groups', not Ray's
        data["provider"].pop("autoscaler_version", None)  # the head's start environment
        data["provider"].pop("ray_token_auth", None)  # the nodes' start environment
        for name, node_type in self.available_node_types.items():
            data["available_node_types"][name]["node_config"] = node_type.node_config.body()
        return data


def _shell_words(options: list[str] | None) -> list[str] | None:
    """docker run options are split into words with the shell's quoting rules at plan time
    (bootstrap passes them to docker as data): each must split on its own."""
    for index, option in enumerate(options or []):
        try:
            shlex.split(option)
        except ValueError as exc:
            raise ValueError(f"option {index} ({option!r}) does not split into shell words "
                             f"({str(exc).lower()}): close its quote or escape") from None
    return options


def _not_a_bool(value: Any) -> Any:
    """YAML's `true` is not a count (pydantic would take it as 1), nor `.nan` or `.inf` one."""
    if isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)):
        shown = str(value).lower()
        raise ValueError(f"{shown} is not a number: write a finite number such as 2")
    return value


_KEY_FILE_READ_LIMIT = 1 << 20


def _not_an_empty_file(value: str | None) -> str | None:
    """A key path naming an empty file would deploy a cluster nobody can reach."""
    if value is None:
        return value
    path = expand_local_path(value)
    try:
        # Only a regular file of a key's size is read here (never /dev/zero or a FIFO): the
        # program refuses the rest, by path, when it reads the key.
        if not path.is_file() or path.stat().st_size > _KEY_FILE_READ_LIMIT:
            return value
        empty = not path.read_bytes().strip()
    except OSError:
        return value  # missing or unreadable: the program says so when it reads the key
    if empty:
        raise ValueError(f"{value} is empty: point it at the key file, or remove the key "
                         "to have one generated")
    return value


def gcp_defaults() -> dict[str, Any]:
    """Ray's GCP defaults as this package ships them: read once a process (every cluster
    config parsed merges them, and parsing the YAML was most of a parse), a copy each call."""
    return copy.deepcopy(_gcp_defaults_read())


@functools.cache
def _gcp_defaults_read() -> dict[str, Any]:
    return load_shipped_yaml(DEFAULTS_FILE)
