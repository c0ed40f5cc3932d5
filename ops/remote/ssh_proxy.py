"""The tunnel to the head: the stack's `ssh_proxy_command` output rendered for its head.

The program exports the template (`provider.ssh_proxy_command`, or in private mode IAP's
`gcloud compute start-iap-tunnel {instance} {port} --listen-on-stdin --zone={zone}
--project={project}`); an empty one means the head is dialled directly. Each placeholder's
value is shell-quoted, so the same line is paramiko's ProxyCommand (split with shlex, run
without a shell) and OpenSSH's (run by the shell) in `invoke ssh-config`.
"""

from __future__ import annotations

import shlex
import shutil

from ops.errors import OpsError
from ops.stacks.stack import StackOutputs

GCLOUD_INSTALL = "https://cloud.google.com/sdk/docs/install"


def proxy_command(outputs: StackOutputs) -> str | None:
    """The head's ProxyCommand line, or None when the head is dialled directly."""
    template = outputs.ssh_proxy_command
    if not template:
        return None
    values = {
        "instance": outputs.head_name,
        "zone": outputs.zone,
        "project": outputs.project,
        "host": outputs.head_internal_ip,
        "port": str(outputs.ssh_port),
        "user": outputs.ssh_user,
    }
    try:
        return template.format(**{key: shlex.quote(value) for key, value in values.items()})
    except (KeyError, IndexError, ValueError) as exc:
        raise OpsError(f"stack output ssh_proxy_command {template!r} cannot be filled in "
                       f"({exc}): fix provider.ssh_proxy_command and run `invoke up`") from None


def head_host(outputs: StackOutputs, proxy: str | None) -> str:
    """The head as it is dialled and pinned: through a tunnel (`proxy`, proxy_command's line)
    by its instance name, there being no address to reach; else by its address."""
    return outputs.head_name if proxy else outputs.head_address


def require_proxy_tool(command: str) -> None:
    """The command's program must be on PATH; gcloud gets told where to get it."""
    program = shlex.split(command)[0]
    if shutil.which(program):
        return
    if program == "gcloud":
        raise OpsError(
            "gcloud is not on PATH: this stack reaches its head through IAP (`gcloud compute "
            f"start-iap-tunnel`): install the Google Cloud CLI ({GCLOUD_INSTALL}) and run "
            "`gcloud auth login`"
        )
    raise OpsError(f"{program} (from provider.ssh_proxy_command) is not on PATH: install it, "
                   "or fix provider.ssh_proxy_command and run `invoke up`")
