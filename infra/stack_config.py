"""Which cluster YAML a stack deploys: `ray-gcp:cluster` in `stacks/Pulumi.<stack>.yaml`."""

from __future__ import annotations

from pathlib import Path

import yaml

from infra.config.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
STACKS_DIR = PROJECT_ROOT / "stacks"
CONFIG_KEY = "ray-gcp:cluster"


def resolve_cluster_path(value: str) -> Path:
    """Stack config paths are relative to the project root, wherever pulumi runs from."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else PROJECT_ROOT / path


def stack_names() -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))


def cluster_path_for_stack(stack: str, stacks_dir: Path | None = None) -> Path:
    """The cluster YAML of a stack, read from its stack config file without the pulumi CLI."""
    path = (stacks_dir or STACKS_DIR) / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = ", ".join(stack_names()) or "none"
        raise ConfigError([("", f"no stack {stack!r} ({path} is missing): use one of {known}")])
    settings = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
    value = settings.get(CONFIG_KEY)
    if not isinstance(value, str):
        raise ConfigError(
            [
                (
                    CONFIG_KEY,
                    f"{path} does not set {CONFIG_KEY}: set it to the "
                    "path of the stack's Ray cluster YAML",
                )
            ]
        )
    return resolve_cluster_path(value)
