"""Read a cluster YAML (a file or an already parsed mapping) into a validated ClusterConfig."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from model.config.cluster import ClusterConfig
from model.config.errors import ConfigError, from_validation_error
from model.yaml_text import DuplicateKeysError, YamlFileError, read_yaml_file, unusable_values


def parse_cluster_config(data: Any, source: str | None = None) -> ClusterConfig:
    """Validate a parsed cluster YAML; every problem comes back in one ConfigError."""
    unusable = unusable_values(data)
    if unusable:
        raise ConfigError(unusable, source)
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, source) from None


def load_cluster_config(path: str | Path) -> ClusterConfig:
    """Load a Ray cluster YAML file; unreadable files and YAML syntax errors are ConfigErrors."""
    path = Path(path)
    try:
        data = read_yaml_file(path)
    except DuplicateKeysError as exc:
        raise ConfigError(exc.problems, str(path)) from None
    except YamlFileError as exc:
        raise ConfigError([("", str(exc))]) from None
    return parse_cluster_config(data, str(path))

