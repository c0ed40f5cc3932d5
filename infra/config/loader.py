"""Read a cluster YAML (a file or an already parsed mapping) into a validated ClusterConfig."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from infra.config.cluster import ClusterConfig
from infra.config.errors import ConfigError, from_validation_error


def parse_cluster_config(data: Any, source: str | None = None) -> ClusterConfig:
    """Validate a parsed cluster YAML; every problem comes back in one ConfigError."""
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, source) from None


def load_cluster_config(path: str | Path) -> ClusterConfig:
    """Load a Ray cluster YAML file; unreadable files and YAML syntax errors are ConfigErrors."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError([("", f"cannot read {path}: {exc.strerror}: check the path")]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(
            [("", f"not valid YAML{where}: {getattr(exc, 'problem', exc)}")], str(path)
        ) from None
    return parse_cluster_config(data, str(path))
