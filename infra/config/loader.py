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
        data = _load_unique_keys(text, str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(
            [("", f"not valid YAML{where}: {getattr(exc, 'problem', exc)}")], str(path)
        ) from None
    return parse_cluster_config(data, str(path))


def _load_unique_keys(text: str, source: str) -> Any:
    """`yaml.safe_load`, except that a key given twice in one mapping is an error: YAML would
    keep the last silently (a second `provider:` would switch the project)."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        duplicates = _duplicate_keys(node, "", set())
        if duplicates:
            raise ConfigError(duplicates, source)
        return loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _duplicate_keys(node: yaml.Node | None, path: str, seen: set[int]) -> list[tuple[str, str]]:
    """(YAML path, message) for every key given twice in the same mapping, both lines named.
    Merge keys (`<<: *defaults`) are YAML's own way to override and stay allowed."""
    if node is None or id(node) in seen:
        return []
    seen.add(id(node))
    problems: list[tuple[str, str]] = []
    if isinstance(node, yaml.MappingNode):
        lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            where = path
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE_TAG:
                where = f"{path}.{key_node.value}" if path else key_node.value
                line = key_node.start_mark.line + 1
                if key_node.value in lines:
                    problems.append((where, f"is given twice, at lines {lines[key_node.value]} "
                                            f"and {line}: keep one (YAML would use the last)"))
                else:
                    lines[key_node.value] = line
            problems += _duplicate_keys(value_node, where, seen)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            problems += _duplicate_keys(item, f"{path}[{index}]", seen)
    return problems
