"""YAML a user wrote (cluster YAMLs, stack files): read it, or say where it breaks and how."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# libyaml's C emitter when PyYAML has it: the pure-Python one was a fifth of `invoke plan`'s
# own time (the head's autoscaler config is dumped twice). Not its C loader: on a deeply
# nested document it crashes the interpreter, where the Python loader raises RecursionError.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_yaml(data: Any) -> str:
    """`yaml.safe_dump(data, sort_keys=True)`, faster."""
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=True)


def load_shipped_yaml(path: Path) -> Any:
    """`yaml.safe_load` of a data file this package ships (flat tables, never a user's
    document), with libyaml's C loader where PyYAML has it: 5-10 times faster, and every plan
    reads the catalog and Ray's defaults."""
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


class YamlFileError(ValueError):
    """A YAML file that cannot be read or parsed; the message names the file, where and the fix."""


class DuplicateKeysError(YamlFileError):
    """Keys given twice in one mapping; `problems` holds (YAML path, message) for each."""

    def __init__(self, source: str, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(f"{path}: {message}"
                                                   for path, message in problems))


def read_yaml_file(path: Path) -> Any:
    """The parsed document of `path`; unreadable files, bad encodings and syntax errors become
    one YamlFileError line naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise YamlFileError(f"{path}: byte {exc.start} is not UTF-8: save the file as UTF-8") \
            from None
    except OSError as exc:
        raise YamlFileError(f"cannot read {path}: {exc.strerror or exc}: check the path") \
            from None
    return parse_yaml_text(text, str(path))


def parse_yaml_text(text: str, source: str) -> Any:
    try:
        data = _load_unique_keys(text, source)
    except yaml.YAMLError as exc:
        raise YamlFileError(f"{source}: {describe_yaml_error(exc)}") from None
    except RecursionError:
        raise YamlFileError(f"{source}: nested too deeply to read: flatten the structure") \
            from None
    if _expanded_size(data, MAX_VALUES) > MAX_VALUES:
        raise YamlFileError(f"{source}: holds more than {MAX_VALUES} values once its aliases "
                            "(*name) are expanded: write the values out, without aliases of "
                            "aliases")
    return data


# A cluster YAML holds a few thousand values; aliases of aliases can stand for billions, which
# validation would expand one by one ("billion laughs").
MAX_VALUES = 100_000


def _expanded_size(data: Any, budget: int) -> int:
    """How many values `data` holds with shared (aliased) parts counted each time they are
    used; stops counting past `budget`."""
    count, stack = 0, [data]
    while stack and count <= budget:
        value = stack.pop()
        count += 1
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count


def describe_yaml_error(exc: yaml.YAMLError) -> str:
    """`not valid YAML at line L, column C: <problem>: <what to do>`."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return (f"not valid YAML{where}: {problem}: fix the syntax there (indentation, a missing "
            "':' or space after it, an unclosed quote or bracket, a tab)")


def unusable_values(data: Any, path: str = "") -> list[tuple[str, str]]:
    """(path, problem) for values YAML parses but nothing downstream can carry: strings (keys
    or values) holding a lone surrogate (YAML's "\\uD800" escape; UTF-8 metadata, scripts and
    JSON cannot), and integers beyond 64 bits (GCE's and the engine's numbers)."""
    found: list[tuple[str, str]] = []
    items = data.items() if isinstance(data, dict) else \
        enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        shown = str(key).encode("utf-8", "backslashreplace").decode()  # printable
        where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{shown}".lstrip(".")
        if isinstance(key, str) and _has_surrogate(key) or \
                isinstance(value, str) and _has_surrogate(value):
            found.append((where, "holds a lone surrogate (a \\uD800-\\uDFFF escape), which is "
                                 "not text: write the character itself or remove it"))
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
            found.append((where, "is too large (more than 64 bits): use a realistic number"))
        elif isinstance(value, dict | list):
            found += unusable_values(value, where)
    return found


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


def _load_unique_keys(text: str, source: str) -> Any:
    """`yaml.safe_load`, except that a key given twice in one mapping is an error: YAML would
    keep the last silently (a second `provider:` would switch the project)."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        duplicates = _duplicate_keys(node, "", set())
        if duplicates:
            raise DuplicateKeysError(source, duplicates)
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
