"""Who each node runs as, with which OAuth scopes and which IAM grants: pure data, no pulumi.

GCE gives a VM an access token only when it runs as a service account, and a call with that
token needs both a scope that covers the API and an IAM permission
(https://cloud.google.com/compute/docs/access/service-accounts#accesscopesiam). Every node
reads the Ray auth token from Secret Manager, whose only scope is cloud-platform
(https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets.versions/access),
and objects of the cluster's bucket (a devstorage scope or cloud-platform:
https://cloud.google.com/storage/docs/oauth-scopes). So, with Google's advice to give the
cloud-platform scope and limit the account by IAM
(https://cloud.google.com/compute/docs/access/service-accounts#scopes_best_practice):

- the head runs as Ray's autoscaler account `ray-autoscaler-sa-v1` (one per project, shared
  with Ray's launcher): on the project only what Ray's autoscaler needs to create and delete
  workers (`roles/compute.admin`, `roles/tpu.admin` with TPU types), `roles/iam.serviceAccountUser`
  on the worker accounts only (to launch workers that run as them), and read access to this
  cluster's secrets and bucket;
- workers run as the cluster's own worker account, made and deleted with the stack: read
  access to this cluster's Ray token and bucket objects, nothing else, so a compromised worker
  reads no other cluster's file_mounts;
- a node_config that names its own account keeps it: the program grants it the same reads,
  and `check_identities` warns when its scopes leave it unable to use them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from model.config import ClusterConfig, ComputeNodeConfig, TpuNodeConfig
from model.config.cluster import CLOUD_PLATFORM_SCOPE
from model.config.urls import service_account_email

Role = Literal["head", "worker"]

COMPUTE_ADMIN = "roles/compute.admin"
TPU_ADMIN = "roles/tpu.admin"
SERVICE_ACCOUNT_USER = "roles/iam.serviceAccountUser"
SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"
OBJECT_VIEWER = "roles/storage.objectViewer"
# Scopes under which Cloud Storage serves an object read
# (https://cloud.google.com/storage/docs/oauth-scopes).
STORAGE_READ_SCOPES = frozenset({
    CLOUD_PLATFORM_SCOPE,
    "https://www.googleapis.com/auth/cloud-platform.read-only",
    "https://www.googleapis.com/auth/devstorage.read_only",
    "https://www.googleapis.com/auth/devstorage.read_write",
    "https://www.googleapis.com/auth/devstorage.full_control",
})
# Service account ids: 6-30 characters, lowercase letter first
# (https://cloud.google.com/iam/docs/service-accounts-create#creating).
ACCOUNT_ID_MAX = 30


def worker_account_id(cluster_name: str) -> str:
    """`ray-<cluster>-worker`, or for a long cluster name its first 18 characters and a digest
    of the whole (still one account per cluster name, within the 30-character limit)."""
    plain = f"ray-{cluster_name}-worker"
    if len(plain) <= ACCOUNT_ID_MAX:
        return plain
    digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:7]
    return f"ray-{cluster_name[:18].rstrip('-')}-{digest}"


def worker_account_email(config: ClusterConfig) -> str:
    return service_account_email(worker_account_id(config.cluster_name), config.provider.project)


def key_secret_id(config: ClusterConfig) -> str:
    """The head's SSH key secret (infra.key_secret)."""
    return f"ray-{config.cluster_name}-ssh-key"


def token_secret_id(config: ClusterConfig) -> str:
    """The Ray auth token's secret (infra.ray_token)."""
    return f"ray-{config.cluster_name}-auth-token"


def bucket_name(config: ClusterConfig) -> str:
    """The cluster's private bucket (infra.bucket, where bootstrap.file_mounts' archive is
    kept): bucket names are global, so the project's hash makes it the project's own (cluster
    names are 1-35 lowercase letters, digits and hyphens)."""
    project = hashlib.sha256(config.provider.project.encode()).hexdigest()[:12]
    return f"ray-{config.cluster_name}-{project}"


def head_project_roles(has_tpu: bool) -> tuple[str, ...]:
    """What the head's autoscaler needs on the project to create and delete workers (TPU nodes
    too when the cluster `has_tpu`): a subset
    of what Ray's launcher grants (ray/autoscaler/_private/gcp/config.py). Not Ray's
    `storage.objectAdmin` (every bucket of the project: the head reads its own through a
    bucket grant), `iam.serviceAccountUser` on the project (it gets it on the worker accounts
    only), nor `iam.roleViewer` (for the launcher's bootstrap, which never runs on the head)."""
    return (COMPUTE_ADMIN, *((TPU_ADMIN,) if has_tpu else ()))


def node_account(
    config: ClusterConfig, role: Role, node_config: ComputeNodeConfig | TpuNodeConfig
) -> tuple[str, tuple[str, ...], bool]:
    """(email, scopes, named by the node_config) of a node type in a role."""
    if isinstance(node_config, ComputeNodeConfig) and node_config.service_accounts:
        account = node_config.service_accounts[0]
        return account.email, tuple(account.scopes), True
    if isinstance(node_config, TpuNodeConfig) and node_config.service_account:
        return node_config.service_account.email, tuple(node_config.service_account.scope), True
    if role == "head":
        return config.autoscaler_service_account_email, (CLOUD_PLATFORM_SCOPE,), False
    return worker_account_email(config), (CLOUD_PLATFORM_SCOPE,), False


@dataclass(frozen=True)
class Grant:
    role: str
    resource: str
    """What the grant is on, as a reader says it: `project P`, `secret S`, `bucket B`,
    `service account E`."""

    def __str__(self) -> str:
        return f"{self.role} on {self.resource}"


@dataclass(frozen=True)
class NodeIdentity:
    """One service account as the nodes of one role run as it."""

    role: Role
    node_types: tuple[str, ...]
    email: str
    scopes: tuple[str, ...]
    grants: tuple[Grant, ...]
    named_by_node_config: bool


def node_reads(config: ClusterConfig) -> tuple[Grant, ...]:
    """What every node reads with its own account: the Ray token, the cluster's bucket."""
    token = (Grant(SECRET_ACCESSOR, f"secret {token_secret_id(config)}"),) \
        if config.provider.ray_token_auth else ()
    return (*token, Grant(OBJECT_VIEWER, f"bucket {bucket_name(config)}"))


def head_grants(config: ClusterConfig, worker_emails: list[str]) -> tuple[Grant, ...]:
    project = config.provider.project
    return (
        *(Grant(role, f"project {project}") for role in head_project_roles(config.has_tpu)),
        Grant(SECRET_ACCESSOR, f"secret {key_secret_id(config)}"),
        *node_reads(config),
        *(Grant(SERVICE_ACCOUNT_USER, f"service account {email}") for email in worker_emails),
    )


def check_identities(identities: list[NodeIdentity]) -> list[str]:
    """One warning per node_config account whose scopes cannot use what its node reads
    (IAM grants the program makes itself; a scope it cannot give)."""
    warnings = []
    for identity in identities:
        if not identity.named_by_node_config:
            continue
        where = f"available_node_types.{identity.node_types[0]}.node_config"
        missing = []
        reads_secret = any(grant.role == SECRET_ACCESSOR for grant in identity.grants)
        if reads_secret and CLOUD_PLATFORM_SCOPE not in identity.scopes:
            missing.append("secret access (Secret Manager takes only the cloud-platform scope)")
        if not STORAGE_READ_SCOPES & set(identity.scopes):
            missing.append("bucket read (no devstorage or cloud-platform scope)")
        if missing:
            warnings.append(
                f"{where}: the {identity.role} runs as {identity.email} with scopes "
                f"{', '.join(identity.scopes) or 'none'}, which lack {' and '.join(missing)}: "
                f"add {CLOUD_PLATFORM_SCOPE} to its scopes (IAM limits the account)")
        if identity.role == "head":
            roles = ", ".join(str(g) for g in identity.grants
                              if g.resource.startswith("project "))
            warnings.append(
                f"{where}: the head runs as {identity.email}, not the cluster's autoscaler "
                f"account: the program grants it reads and actAs on the worker accounts, but "
                f"not the project roles its autoscaler needs ({roles}): grant them yourself")
    return warnings
