"""Readable config errors: one line per problem, each naming its YAML path and the fix."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import ValidationError

# Tags of the node_config union; they are pydantic's bookkeeping, not YAML keys.
_UNION_TAGS = {"compute", "tpu"}
_NUMBER_TAGS = {"int", "float"}


class ConfigError(Exception):
    """A cluster YAML that cannot be deployed, with every problem found."""

    def __init__(self, problems: Sequence[tuple[str, str]], source: str | None = None) -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"invalid cluster config {self.source}" if self.source else "invalid cluster config"
        lines = [f"{head}:"]
        lines += [f"  {path or '<top level>'}: {message}" for path, message in self.problems]
        return "\n".join(lines)


class PathError(ValueError):
    """Raised by cross-field validators to point at a path below the model they check."""

    def __init__(self, problems: Iterable[tuple[str, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{p}: {m}" for p, m in self.problems))


def _join(loc: Iterable[str | int]) -> str:
    parts: list[str] = []
    for item in loc:
        if item in _UNION_TAGS and parts and parts[-1].endswith("node_config"):
            continue
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        else:
            parts.append(str(item))
    return ".".join(parts)


# pydantic's type errors -> what the YAML should hold, with an example of it.
_EXPECTED = {
    "string_type": ("text", '"my-value"'),
    "int_type": ("a whole number", "2"),
    "int_parsing": ("a whole number", "2"),
    "int_from_float": ("a whole number", "2"),
    "float_type": ("a number", "1.5"),
    "float_parsing": ("a number", "1.5"),
    "bool_type": ("true or false", "true"),
    "bool_parsing": ("true or false", "true"),
    "list_type": ("a list", "[a, b]"),
    "dict_type": ("a mapping", "{key: value}"),
}


def _kind_of(value: object) -> str:
    """A YAML value's kind, as the user wrote it."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return f"{str(value).lower()} (true/false)"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _message(error: dict) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key: remove it or check its spelling"
    if kind == "missing":
        return "is required: add it"
    if kind in ("less_than_equal", "greater_than_equal", "greater_than", "less_than"):
        return f"{error['msg']}: change it"
    if kind in _EXPECTED:
        expected, example = _EXPECTED[kind]
        given = error.get("input")
        if kind == "string_type" and isinstance(given, int | float) and \
                not isinstance(given, bool):
            example = f'"{given}" (quoted)'
        return f"is {_kind_of(given)}, expected {expected}: write it as e.g. {example}"
    message = error["msg"]
    return message.removeprefix("Value error, ")


def from_validation_error(exc: ValidationError, source: str | None = None) -> ConfigError:
    """Flatten pydantic's errors into (path, message) pairs with YAML key names."""
    problems: list[tuple[str, str]] = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, PathError):
            for sub_path, message in cause.problems:
                problems.append((_join(loc + tuple(_split(sub_path))), message))
        else:
            if loc and loc[-1] in _NUMBER_TAGS:  # `int | float`: one problem, not one a branch
                loc = loc[:-1]
            problems.append((_join(loc), _message(error)))
    return ConfigError(list(dict.fromkeys(problems)), source)


def _split(path: str) -> list[str]:
    return [part for part in path.split(".") if part]
