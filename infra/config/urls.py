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


def network_path(project: str, network: str) -> str:
    """A network as `projects/<p>/global/networks/<n>` (what the TPU API reports back), from
    a bare name, a partial URL or a full Compute API URL."""
    if "projects/" in network:
        return network[network.index("projects/") :]
    if "/" in network:
        return f"projects/{project}/{network}"
    return f"projects/{project}/global/networks/{network}"


def subnetwork_path(project: str, region: str, subnetwork: str) -> str:
    """A subnetwork as `projects/<p>/regions/<r>/subnetworks/<s>`, from any of its forms."""
    if "projects/" in subnetwork:
        return subnetwork[subnetwork.index("projects/") :]
    if "/" in subnetwork:
        return f"projects/{project}/{subnetwork}"
    return f"projects/{project}/regions/{region}/subnetworks/{subnetwork}"
