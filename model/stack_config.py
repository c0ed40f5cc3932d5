"""The stack files, `stacks/Pulumi.<stack>.yaml`, read without the pulumi CLI, and the folder
where this checkout keeps local state beside them.

A stack selects its cluster with `ray-gcp:cluster` (a YAML path) or `ray-gcp:clusterConfig`
(the YAML inline) and may set `ray-gcp:workerCounts` and `ray-gcp:policyConfig` (the policy
pack config the review and the engine judge it with). Every task reads a stack file through
`read_stack_config`, so a typo there is one line naming the file, the key and the fix. No
pydantic here: `invoke exec` checks the stack file too and must start fast.

Local state lives in `.ray-gcp/` in the folder the task runs in (the user's project folder, as `ray
up` resolves the YAML's relative paths there; in a checkout of this repository it is git-ignored),
or the folder $RAY_GCP_STATE_DIR names, never inside the installed tool: `ops` keeps each stack's
pinned host keys and key file there (and, for the stacks `invoke up -c` creates, pulumi's file
backend in `.pulumi/` and the generated passphrase), `bootstrap.local_cluster` its record of running
local clusters.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any

from model.private_files import private_folder
from model.yaml_text import YamlFileError, read_yaml_file

PROJECT_ROOT = Path(__file__).resolve().parents[1]
STACKS_DIR = PROJECT_ROOT / "stacks"
NAMESPACE = "ray-gcp:"
CONFIG_KEY = "ray-gcp:cluster"
INLINE_KEY = "ray-gcp:clusterConfig"
COUNTS_KEY = "ray-gcp:workerCounts"
# The policy pack's config (Pulumi's --policy-pack-config JSON) the stack is judged with.
POLICY_KEY = "ray-gcp:policyConfig"
# What a stack adopting a `ray up` cluster takes over (model/adoption.py; `invoke adopt`).
ADOPT_KEY = "ray-gcp:adopt"
# Another stack (`org/project/stack`) whose outputs `network` and `subnetwork` the cluster joins
# by StackReference (docs/team.md, "A network stack").
NETWORK_STACK_KEY = "ray-gcp:networkStack"
# Every `ray-gcp:*` key the program or its review reads; another key there is a typo.
STACK_KEYS = (CONFIG_KEY, INLINE_KEY, COUNTS_KEY, POLICY_KEY, ADOPT_KEY, NETWORK_STACK_KEY)
STATE_DIR_ENV = "RAY_GCP_STATE_DIR"
# Pulumi's stack reference forms: `stack`, `project/stack`, `org/project/stack`.
_STACK_NAME = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+){0,2}")


class StackFileError(ValueError):
    """A stack file the program cannot use: one line per problem, each naming file and key."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__("\n".join(f"{shown(path)}: {problem}" for problem in problems))


def shown(path: Path) -> str:
    """A path as a user in the project would type it."""
    path = Path(path)
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def resolve_cluster_path(value: str, root: Path = PROJECT_ROOT) -> Path:
    """Stack config paths are relative to the project root, wherever pulumi runs from."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else root / path


def stack_names(stacks_dir: Path | None = None) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")]
                  for p in (stacks_dir or STACKS_DIR).glob("Pulumi.*.yaml"))


def stack_file(stack: str, stacks_dir: Path | None = None) -> Path:
    """`<stacks_dir>/Pulumi.<stack>.yaml`, which must exist."""
    path = (stacks_dir or STACKS_DIR) / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(stack_names(stacks_dir)) or "none"
        raise StackFileError(path, [f"no stack {stack!r} (this file is missing): use one of "
                                    f"{known}, or create it with `pulumi stack init {stack}`"])
    return path


def read_stack_config(path: Path, root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The `config:` mapping of a stack file, its `ray-gcp:*` keys checked: known names, the
    right types, a cluster YAML that exists (relative paths are under `root`)."""
    try:
        document = read_yaml_file(path)
    except YamlFileError as exc:
        raise StackFileError(path, [str(exc).removeprefix(f"{path}: ")]) from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise StackFileError(path, ["the file must be a mapping with a `config:` section: "
                                    f"see {shown(STACKS_DIR / 'Pulumi.full.yaml')}"])
    settings = document.get("config") or {}
    if not isinstance(settings, dict):
        raise StackFileError(path, ["config: must be a mapping of `namespace:key: value`"])
    problems = [problem for key, value in settings.items()
                if (problem := _check_key(str(key), value, root))]
    if not problems and not any(key in settings for key in (CONFIG_KEY, INLINE_KEY)):
        problems.append(f"config: names no cluster: add `{CONFIG_KEY}: "
                        "stacks/clusters/<name>.yaml` (or run `pulumi config set "
                        f"{CONFIG_KEY} <path>`)")
    if problems:
        raise StackFileError(path, problems)
    return settings


def _check_key(key: str, value: Any, root: Path) -> str | None:
    if not key.startswith(NAMESPACE) or (isinstance(value, dict) and "secure" in value):
        return None  # another provider's key, or a secret encrypted with the stack's key
    if key not in STACK_KEYS:
        close = difflib.get_close_matches(key, STACK_KEYS, n=1)
        hint = f"did you mean {close[0]}?" if close else f"use one of {', '.join(STACK_KEYS)}"
        return f"config.{key}: unknown key: {hint}"
    if key == CONFIG_KEY:
        if not isinstance(value, str) or not value.strip():
            return f"config.{key}: must be the path of a Ray cluster YAML, got {value!r}"
        cluster = resolve_cluster_path(value, root)
        if not cluster.is_file():
            return (f"config.{key}: {value} does not exist (looked for {cluster}): fix the "
                    "path, relative to the project folder")
    if key == POLICY_KEY and (not isinstance(value, str)
                              or not resolve_cluster_path(value, root).is_file()):
        return (f"config.{key}: {value!r} is not a policy config file: give the path of a JSON "
                "file, relative to the project folder (see docs/guardrails.md)")
    if key == INLINE_KEY and not isinstance(value, dict):
        return f"config.{key}: must be the cluster YAML as a mapping, got {type(value).__name__}"
    if key == COUNTS_KEY:
        return _check_counts(key, value)
    if key == NETWORK_STACK_KEY and not (isinstance(value, str)
                                         and _STACK_NAME.fullmatch(value.strip())):
        return (f"config.{key}: {value!r} is not a stack name: give the network stack as "
                "org/project/stack (e.g. acme/network/prod), as `pulumi stack ls` shows it")
    return None


def _check_counts(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"config.{key}: must map node type to count, e.g. `ray_worker_small: 2`"
    for node_type, count in value.items():
        whole = (isinstance(count, int) and not isinstance(count, bool)) or \
            (isinstance(count, float) and count.is_integer())
        if not whole or count < 0:
            return (f"config.{key}.{node_type}: {count!r} is not a whole number: set a count "
                    "such as 2 (or `invoke scale -s STACK --type T --count N`)")
    return None


def check_stack(stack: str, stacks_dir: Path | None = None, root: Path = PROJECT_ROOT
                ) -> dict[str, Any]:
    """The checked `config:` mapping of `stack`'s file."""
    return read_stack_config(stack_file(stack, stacks_dir), root)


def cluster_path_for_stack(stack: str, stacks_dir: Path | None = None) -> Path:
    """The cluster YAML of a stack, read from its stack config file without the pulumi CLI."""
    path = stack_file(stack, stacks_dir)
    value = read_stack_config(path).get(CONFIG_KEY)
    if not isinstance(value, str):
        raise StackFileError(path, [f"config.{CONFIG_KEY}: not set (the cluster is inline in "
                                    f"{INLINE_KEY}): set {CONFIG_KEY} to a cluster YAML path"])
    return resolve_cluster_path(value)


class StateDirError(Exception):
    """The local state folder cannot be made; the message names it and the variable that
    moves it."""


def state_base() -> Path:
    """$RAY_GCP_STATE_DIR, else `.ray-gcp/` in the folder the task runs in."""
    return Path(os.environ.get(STATE_DIR_ENV) or Path.cwd() / ".ray-gcp").absolute()


def writable_folder(path: Path) -> Path:
    """`path`, created when missing and private (0700, tightened on every use:
    model.private_files); one line naming it and $RAY_GCP_STATE_DIR when it cannot be."""
    try:
        private_folder(path)
    except OSError as exc:
        raise StateDirError(f"cannot create {path} ({exc.strerror}): set {STATE_DIR_ENV} to a "
                            "writable folder") from None
    return path
