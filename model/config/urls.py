"""GCP resource URL forms: Ray YAMLs use short names, the Compute API wants partial URLs."""

from __future__ import annotations


def machine_type_url(zone: str, machine_type: str) -> str:
    """`n1-standard-2` -> `zones/<zone>/machineTypes/n1-standard-2`; URLs pass through."""
    if "/" in machine_type:
        return machine_type
    return f"zones/{zone}/machineTypes/{machine_type}"


def accelerator_type_url(project: str, zone: str, accelerator_type: str) -> str:
    """`nvidia-tesla-t4` -> `projects/<p>/zones/<z>/acceleratorTypes/nvidia-tesla-t4`."""
    if "/" in accelerator_type:
        return accelerator_type
    return f"projects/{project}/zones/{zone}/acceleratorTypes/{accelerator_type}"


def disk_type_url(zone: str, disk_type: str) -> str:
    """`pd-ssd` -> `zones/<zone>/diskTypes/pd-ssd`; URLs pass through."""
    if "/" in disk_type:
        return disk_type
    return f"zones/{zone}/diskTypes/{disk_type}"


def short_name(url: str) -> str:
    """The last path segment: what pulumi-gcp shows for a machine or accelerator type."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def service_account_email(account_id: str, project: str) -> str:
    return f"{account_id}@{project}.iam.gserviceaccount.com"


_COMPUTE_API_ROOTS = (
    "https://www.googleapis.com/compute/v1/",
    "https://compute.googleapis.com/compute/v1/",
)


def resource_path(url: str) -> str:
    """A Compute self-link without its API root: `projects/p/global/networks/n`."""
    for root in _COMPUTE_API_ROOTS:
        if url.startswith(root):
            return url[len(root) :]
    return url


def tpu_network_path(project: str, network: str) -> str:
    """The TPU API's documented form `projects/<p>/global/networks/<n>` from a short name,
    `global/networks/<n>` or a self-link."""
    path = resource_path(network)
    if "/" not in path:
        path = f"global/networks/{path}"
    return path if path.startswith("projects/") else f"projects/{project}/{path}"


def tpu_subnetwork_path(project: str, region: str, subnetwork: str) -> str:
    """`projects/<p>/regions/<r>/subnetworks/<s>` from a short name, `regions/...` or a
    self-link."""
    path = resource_path(subnetwork)
    if "/" not in path:
        path = f"regions/{region}/subnetworks/{path}"
    return path if path.startswith("projects/") else f"projects/{project}/{path}"
