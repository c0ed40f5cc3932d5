"""Private clusters: no public address on any node, SSH through a tunnel, OS Login.

`provider.private_cluster` takes every external IP away, admits SSH from IAP's TCP-forwarding
range only and gives the region's subnet a Cloud NAT for egress. (`use_internal_ips` keeps
Ray's meaning, dial the internal IPs, and also leaves the nodes without an external IP
(`model/plan.py`), but it makes no NAT and opens no IAP range.) `provider.ssh_proxy_command`
is the tunnel the tasks (and `invoke ssh-config`) reach the head through; in private mode it
defaults to IAP.
`provider.os_login` turns on OS Login. No pulumi imports: the model's own rules.
"""

from __future__ import annotations

import ipaddress
import re
import string
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

# Google's documented source range of IAP TCP forwarding (cloud.google.com/iap/docs/
# using-tcp-forwarding): the only one that reaches a node without a public address.
IAP_SOURCE_RANGE = "35.235.240.0/20"
# `gcloud compute start-iap-tunnel INSTANCE_NAME INSTANCE_PORT` relaying stdin/stdout, as
# `gcloud compute ssh --tunnel-through-iap` runs it.
IAP_PROXY_COMMAND = (
    "gcloud compute start-iap-tunnel {instance} {port} --listen-on-stdin "
    "--zone={zone} --project={project}"
)
PROXY_PLACEHOLDERS = ("instance", "zone", "project", "host", "port", "user")
OS_LOGIN_ROLES = {"admin": "roles/compute.osAdminLogin", "user": "roles/compute.osLogin"}
_MEMBER = re.compile(r"^(user|group|serviceAccount|domain|principal|principalSet):\S+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class PrivateCluster(_Strict):
    """`provider.private_cluster`: `true`, or a mapping with the options below."""

    existing_cloud_nat: bool = False
    """The network already has a Cloud NAT for the region: the stack creates none."""


class OsLogin(_Strict):
    """`provider.os_login`: nodes take logins from OS Login (`enable-oslogin: TRUE`, no
    `ssh-keys` metadata); `principal` gets the role on the project, and `serviceAccountUser`
    on the nodes' service account (both added, never replacing other members)."""

    principal: str
    """Who runs the tasks, as an IAM member: `user:alice@example.com`, `group:...`,
    `serviceAccount:...`."""
    role: Literal["admin", "user"] = "admin"
    """`admin` (roles/compute.osAdminLogin, sudo: Ray's setup needs it) or `user`."""

    @field_validator("principal")
    @classmethod
    def _member(cls, value: str) -> str:
        if not _MEMBER.fullmatch(value):
            raise ValueError(
                f"{value!r} is not an IAM member: write e.g. user:alice@example.com or "
                "group:ray-users@example.com"
            )
        return value

    @property
    def login_role(self) -> str:
        return OS_LOGIN_ROLES[self.role]


def proxy_template_problem(template: str) -> str | None:
    """Why `template` is not a usable ProxyCommand template, or None."""
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        return f"{exc}: write placeholders as {{instance}} and a literal brace as {{{{ or }}}}"
    unknown = [name for name in fields if name not in PROXY_PLACEHOLDERS]
    if unknown:
        known = ", ".join(f"{{{name}}}" for name in PROXY_PLACEHOLDERS)
        return f"unknown placeholder {{{unknown[0]}}}: use only {known}"
    if not template.strip():
        return "the command is empty: give one, e.g. " + IAP_PROXY_COMMAND
    return None


def covers_everything(ranges: Iterable[str]) -> str | None:
    """`0.0.0.0/0` (or `::/0`) when `ranges` together admit every address of that family."""
    networks = [ipaddress.ip_network(cidr, strict=False) for cidr in ranges]
    for whole in (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0")):
        same = [n for n in networks if n.version == whole.version]
        if same and whole in ipaddress.collapse_addresses(same):  # type: ignore[arg-type]
            return str(whole)
    return None
