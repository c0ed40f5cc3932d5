"""The task's side of the outputs keeper (ops.stacks.outputs_keeper holds them and says the
protocol): a stack's outputs from the keeper while its state is unchanged, else from the pulumi
CLI, handed to the keeper after.

An answer is filed in a slot named for the project folder, the backend URL, the stack and how
its secrets are unlocked (the passphrase, or its file's path and identity: digested, never
sent), under a key that adds the identity of the stack's state (ops.stacks.checkpoint). So any `up`,
`refresh`, `destroy` or `stack rm` makes the next task ask the CLI again; a backend with no
cheap check (anything but `file://`), $RAY_GCP_SSH_PERSIST=0, a state folder that is not ours,
or a keeper that is missing, dead or holds nothing for the key all mean the CLI. The key is
taken before the CLI runs: outputs it read while the state changed are filed under a key no
later state has (the identity covers the checkpoint's bytes and times), so never served. The
keeper is started in the background by the task that found none, its outputs over stdin; the
task does not wait for it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from model.stack_config import StateDirError
from ops.errors import OpsError
from ops.paths import BACKEND_ENV, PASSPHRASE_ENV, PASSPHRASE_FILE_ENV, keeper_dir
from ops.stacks.background import PROJECT_ROOT, idle_seconds, request_line, start_detached
from ops.stacks.checkpoint import digest, state_identity
from ops.stacks.outputs_keeper import SOCKET_NAME


def _passphrase_file(env: Mapping[str, str]) -> list[Any]:
    given = env.get(PASSPHRASE_FILE_ENV)
    if not given:
        return []
    try:
        info = os.stat(given)
    except OSError:
        return [given]
    return [given, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def slot_and_key(project: str, stack: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """Where the keeper files stack `stack`'s outputs as the CLI would read them with `env`,
    and the key valid for its state now; None when the state cannot be told cheaply."""
    url = env.get(BACKEND_ENV)
    state = state_identity(url, project, stack, PROJECT_ROOT)  # where the CLI runs
    if state is None:
        return None
    slot = digest([str(PROJECT_ROOT), url, project, stack, env.get(PASSPHRASE_ENV),
                   _passphrase_file(env)])
    return slot, digest([slot, state])


def ask(path: Path, request: dict[str, Any]) -> dict[str, Any] | None:
    """The keeper's answer to one request; None when no keeper answers."""
    line = request_line(path, request)
    try:
        answer = json.loads(line or b"null")
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def kept_outputs(project: str, stack: str, env: Mapping[str, str],
                 read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Stack `stack`'s outputs: the keeper's while the state is the one they were read from,
    else `read()` (the CLI, with `env`), then kept for the next task."""
    idle = idle_seconds()
    filed = slot_and_key(project, stack, env) if idle > 0 else None
    if filed is None:
        return read()
    slot, key = filed
    try:
        path = keeper_dir() / SOCKET_NAME
    except (OpsError, StateDirError):
        return read()  # no private folder of ours to meet a keeper in: the CLI, as before
    answer = ask(path, {"get": slot, "key": key})
    if answer is not None and isinstance(answer.get("outputs"), dict):
        return answer["outputs"]
    outputs = read()
    if answer is None or ask(path, {"put": slot, "key": key, "outputs": outputs}) is None:
        start_detached("ops.stacks.outputs_keeper",
                       {"folder": str(path.parent), "idle_seconds": idle,
                        "slot": slot, "key": key, "outputs": outputs})
    return outputs


def stop_keeper() -> bool:
    """Ask the keeper to exit, forgetting what it holds; whether one was there."""
    return ask(keeper_dir() / SOCKET_NAME, {"stop": True}) == {"bye": True}
