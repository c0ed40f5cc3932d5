"""What of a cluster `ray up` made a new stack can take over, and what it cannot (pure: the
instances and the rest as `cloud.read_ray_made` read them, and the YAML).

Taken over: the head (imported under its own name), the `ray-autoscaler-sa-v1` account and the
project roles it holds that the stack grants too (imported), and each worker type's running
workers, which stay Ray's autoscaler's: `ray up` pins none, and the head goes on running the
autoscaler `ray up` started, which keeps each type's `min_workers` itself (a worker the stack
took would be one it no longer counts, and replaced: docs/coming-from-ray-up.md).

Refused, each with the way out: no head, or several; nodes that already carry a stack's label;
a node whose type the YAML does not have (the cluster was made from another YAML); a node
whose machine no longer matches its type's node_config in the YAML (machine type, boot image
and disk, accelerators, spot/preemptible: the stack would stop or replace it); a stopped node
(`cache_stopped_nodes`); TPU node types; a head with data disks of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from model.adoption import Adoption
from model.config import ClusterConfig, ComputeNodeConfig
from model.identities import head_project_roles
from model.labels import KIND_HEAD, KIND_WORKER, NODE_KIND, STACK, USER_NODE_TYPE

RAY_KEY_FILE = "~/.ssh/ray-autoscaler_gcp_{region}_{project}_{user}_{index}.pem"


@dataclass
class Survey:
    config: ClusterConfig
    head: dict[str, Any] | None = None
    autoscaler: dict[str, list[str]] = field(default_factory=dict)
    account: str = ""
    """The autoscaler account's email when it exists."""
    roles_imported: list[str] = field(default_factory=list)
    roles_created: list[str] = field(default_factory=list)
    roles_left: list[str] = field(default_factory=list)
    """Roles Ray granted that the stack does not: left as they are."""
    ray_keys: list[str] = field(default_factory=list)
    """The project's `ssh-keys` lines for the YAML's ssh_user (Ray's key)."""
    firewalls: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)

    @property
    def adoption(self) -> Adoption:
        if self.head is None:
            raise ValueError("no head to adopt")
        return Adoption(head=self.head["name"], service_account=bool(self.account),
                        roles=tuple(self.roles_imported),
                        autoscaler={k: tuple(v) for k, v in self.autoscaler.items()})


def survey(config: ClusterConfig, instances: list[dict[str, Any]],
           account: dict[str, Any] | None, account_roles: list[str], ssh_keys: list[str],
           firewalls: list[dict[str, Any]]) -> Survey:
    """Judge what Ray made (instances oldest first) against the YAML."""
    found = Survey(config=config)
    name, where = config.cluster_name, (f"project {config.provider.project}, zone "
                                        f"{config.provider.availability_zone}")
    if config.has_tpu:
        found.refusals.append(
            "TPU node types (a TPU VM or pod slice) cannot be adopted: `ray down` the cluster "
            "and `invoke up -c` it, or adopt a YAML without TPU types")
    owned = [i["name"] for i in instances if STACK in (i.get("labels") or {})]
    if owned:
        found.refusals.append(
            f"{', '.join(owned)} already belong to a stack (label {STACK}): this cluster is "
            "deployed by this tool already; work on it with `invoke up -s <stack>`")
    heads = [i for i in instances if (i.get("labels") or {}).get(NODE_KIND) == KIND_HEAD]
    if not instances:
        found.refusals.append(
            f"no node of Ray cluster {name!r} in {where} (Ray's label ray-cluster-name={name}): "
            "check cluster_name, provider.project_id and provider.availability_zone against "
            "the YAML `ray up` used")
    elif len(heads) != 1:
        found.refusals.append(
            f"Ray cluster {name!r} in {where} has {len(heads)} heads "
            f"({', '.join(h['name'] for h in heads) or 'none'}): `ray up` it again so that it "
            "has one, then adopt")
    else:
        found.head = heads[0]
        _judge_node(config, heads[0], config.head_node_type, found.refusals)
        node_config = config.head_type.node_config
        if isinstance(node_config, ComputeNodeConfig) and len(node_config.disks) > 1:
            found.refusals.append(
                f"the head's node_config has {len(node_config.disks) - 1} data disk(s): "
                "adopting a head with disks of its own is not supported; `ray down` and "
                "`invoke up -c` instead")
    _workers(config, [i for i in instances if i not in heads], found)
    _identity(config, account, account_roles, found)
    user = config.auth.ssh_user
    found.ray_keys = [line for line in ssh_keys if line.split(":", 1)[0] == user
                      and line.rstrip().endswith(f" {user}")]
    tags = {tag for i in instances for tag in (i.get("tags") or {}).get("items") or []}
    found.firewalls = sorted(
        f["name"] for f in firewalls
        if tags & {*(f.get("targetTags") or []), *(f.get("sourceTags") or [])}
        or f["name"].startswith(f"ray-{name}-"))
    return found


def _workers(config: ClusterConfig, workers: list[dict[str, Any]], found: Survey) -> None:
    """Per worker type, the running workers, all the autoscaler's."""
    for instance in workers:
        labels = instance.get("labels") or {}
        node_type = labels.get(USER_NODE_TYPE, "")
        if labels.get(NODE_KIND) != KIND_WORKER:
            found.refusals.append(f"{instance['name']} is a node of kind "
                                  f"{labels.get(NODE_KIND)!r}, not one Ray's launcher makes: "
                                  "delete it or `ray down` the cluster first")
            continue
        if node_type not in config.worker_types:
            found.refusals.append(
                f"worker {instance['name']} is of type {node_type!r}, which the YAML has no "
                "longer (the cluster was made from another YAML): give `invoke adopt` the YAML "
                "`ray up` used, or `ray down` that worker's type first")
            continue
        if instance.get("status") != "RUNNING":
            found.refusals.append(
                f"worker {instance['name']} is {instance.get('status')} (cache_stopped_nodes): "
                f"delete it (`gcloud compute instances delete {instance['name']} --zone "
                f"{config.provider.availability_zone}`) or start it, then adopt")
            continue
        if _judge_node(config, instance, node_type, found.refusals):
            found.autoscaler.setdefault(node_type, []).append(instance["name"])


def _identity(config: ClusterConfig, account: dict[str, Any] | None, roles: list[str],
              found: Survey) -> None:
    ours = head_project_roles(config.has_tpu)
    if account is None:
        found.roles_created = list(ours)
        return
    found.account = account["email"]
    found.roles_imported = [role for role in ours if role in roles]
    found.roles_created = [role for role in ours if role not in roles]
    found.roles_left = [role for role in roles if role not in ours]


def _judge_node(config: ClusterConfig, instance: dict[str, Any], node_type: str,
                refusals: list[str]) -> bool:
    """Whether the instance is made as its type's node_config says: else a refusal naming
    what differs (the stack would stop the node to change it, or replace it)."""
    labels = instance.get("labels") or {}
    if labels.get(USER_NODE_TYPE) != node_type:
        refusals.append(
            f"{instance['name']} is of type {labels.get(USER_NODE_TYPE)!r}, not the YAML's "
            f"{node_type!r} (the cluster was made from another YAML): give `invoke adopt` the "
            "YAML `ray up` used")
        return False
    node_config = config.available_node_types[node_type].node_config
    if not isinstance(node_config, ComputeNodeConfig):
        return False  # a TPU type: refused as a whole above
    differences = node_differences(node_config, instance)
    if differences:
        refusals.append(
            f"{instance['name']} ({node_type}) no longer matches its node_config in the YAML: "
            f"{'; '.join(differences)}. Put back the node_config `ray up` used (adopt first, "
            "change it after), or `ray down` and `invoke up -c`")
        return False
    return True


def node_differences(node_config: ComputeNodeConfig, instance: dict[str, Any]) -> list[str]:
    """What the instance is made of that the node_config says otherwise, one phrase each:
    machine type, boot image, boot disk size and type, accelerators, spot/preemptible."""
    wanted = node_config.body()
    found: list[str] = []

    def differ(what: str, yaml_value: Any, live: Any) -> None:
        if yaml_value is not None and yaml_value != live:
            found.append(f"{what} is {live!r}, the YAML says {yaml_value!r}")

    differ("machineType", _short(wanted.get("machineType")), _short(instance.get("machineType")))
    boot = next((d for d in wanted.get("disks") or [] if d.get("boot")), {})
    live_boot = next((d for d in instance.get("disks") or [] if d.get("boot")), {})
    params, live_params = boot.get("initializeParams") or {}, live_boot.get(
        "initializeParams") or {}
    image, live_image = params.get("sourceImage"), live_params.get("sourceImage")
    if image and live_image and not same_image(image, live_image):
        found.append(f"boot image is {live_image!r}, the YAML says {image!r}")
    differ("boot disk size", params.get("diskSizeGb"), live_params.get("diskSizeGb"))
    if params.get("diskType") and live_params.get("diskType"):
        differ("boot disk type", _short(params["diskType"]), _short(live_params["diskType"]))
    differ("guestAccelerators", _accelerators(wanted), _accelerators(instance))
    differ("spot/preemptible", _spot(wanted.get("scheduling")),
           _spot(instance.get("scheduling")))
    return found


def same_image(yaml_image: str, live_image: str) -> bool:
    """The same image, or the YAML's family and an image of it (`.../images/family/f` and
    `.../images/f-v2024...`: the family's image when the node was made), as the Terraform
    provider's image diff suppression judges them."""
    yaml_path, live_path = _image_path(yaml_image), _image_path(live_image)
    if yaml_path == live_path:
        return True
    project, _, rest = yaml_path.partition("/global/images/")
    if rest.startswith("family/"):
        live_project, _, live_rest = live_path.partition("/global/images/")
        family = rest.removeprefix("family/")
        return live_project == project and (live_rest == rest or live_rest.startswith(family))
    return False


def _image_path(image: str) -> str:
    return image.split("/compute/v1/", 1)[-1].split("/compute/beta/", 1)[-1]


def _short(value: Any) -> Any:
    return value.rsplit("/", 1)[-1] if isinstance(value, str) else value


def _accelerators(body: dict[str, Any]) -> list[tuple[str, int]]:
    return sorted((_short(a.get("acceleratorType")), int(a.get("acceleratorCount") or 0))
                  for a in body.get("guestAccelerators") or [])


def _spot(scheduling: dict[str, Any] | None) -> bool:
    """One Scheduling object: the YAML's as the model reads it (Ray's list form merged) or
    the instance's as GCE made it."""
    scheduling = scheduling or {}
    return bool(scheduling.get("preemptible")) or scheduling.get("provisioningModel") == "SPOT"
