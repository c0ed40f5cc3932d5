"""Ray's token authentication for the day-two tasks.

A stack deployed with token auth (the default; `provider.ray_token_auth: false` turns it off)
has the secret output `ray_auth_token`, and every node's startup script wrote the same token to
`~/.ray/auth_token` (mode 0600) of the user Ray runs as, inside the container with docker.

- On the head (`status`, `submit`, `exec`): the command runs with `RAY_AUTH_MODE=token` and
  `RAY_AUTH_TOKEN_PATH` naming the node's own file, so the token never crosses the wire.
- Here (the dashboard through `invoke dashboard`'s port forward, `ray job submit` against it):
  the token from the stack's secret output goes to a 0600 file in the stack's state folder, and
  Ray's clients read it from there (`local_ray_env`). Ray's dashboard takes it as
  `Authorization: Bearer <token>` (or its `ray-authentication-token` cookie, which the page
  sets after asking for the token once).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ops.paths import state_dir

if TYPE_CHECKING:
    from ops.stacks.stack import StackOutputs

# bootstrap.node_metadata.RAY_AUTH_TOKEN_FILE (a test keeps them equal): not imported, as the
# bootstrap package brings the config model, and `invoke exec` must start fast.
NODE_TOKEN_FILE = ".ray/auth_token"
LOCAL_TOKEN_FILE = "ray_auth_token"


def with_ray_auth(command: str, outputs: StackOutputs) -> str:
    """`command` (shell text run on a node, in the container with docker) with Ray's token
    auth when the stack has it: `$HOME` expands where the command runs."""
    if not outputs.ray_auth_token:
        return command
    return (f'export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$HOME/{NODE_TOKEN_FILE}"; '
            f"{command}")


def write_local_token(outputs: StackOutputs, folder: Path | None = None) -> Path | None:
    """The stack's token in `<state folder>/ray_auth_token`, readable by this user only; None
    when the stack runs without token auth."""
    if not outputs.ray_auth_token:
        return None
    path = (folder or state_dir(outputs.stack)) / LOCAL_TOKEN_FILE
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(descriptor, 0o600)  # an older file keeps its mode through O_CREAT
    with os.fdopen(descriptor, "w") as token_file:
        token_file.write(outputs.ray_auth_token)
    return path


def local_ray_env(token_file: Path | None) -> dict[str, str]:
    """What a Ray client here (`ray job submit`, `JobSubmissionClient`) needs in its environment
    to present the token in `token_file`; nothing without one."""
    if token_file is None:
        return {}
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file)}


def dashboard_lines(url: str, token_file: Path | None, token: str = "") -> list[str]:
    """How to open the forwarded dashboard and submit jobs through it with the token in
    `token_file` (none: the stack runs without token auth, nothing to say); `token` is printed
    only when given (`invoke dashboard --show-token`)."""
    if token_file is None:
        return []
    env = " ".join(f"{key}={value}" for key, value in local_ray_env(token_file).items())
    lines = [
        "Ray token auth is on: the dashboard asks for the cluster's token once (it keeps it in "
        "a cookie)",
        f"  the token is in {token_file} (mode 0600); `invoke dashboard --show-token` prints it",
        f"jobs through it: {env} ray job submit --address {url} -- python SCRIPT",
    ]
    if token:
        lines.append(f"token: {token}")
    return lines
