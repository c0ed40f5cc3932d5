"""Randomly broken cluster YAMLs end accepted or in one path-named ConfigError, never a crash.

Seeds are the shipped cluster YAMLs and Ray's own GCP `defaults.yaml` from the installed
wheel. Each example applies a few mutations (keys deleted, values swapped for other types,
huge numbers, unicode and lone surrogates, deep nesting, YAML aliases, file_mounts and
`ssh_private_key` pointing at symlink loops, device files, FIFOs, directories and malformed
keys, broken YAML text) and drives the file through the loader, the program's plan under the
mock engine and the startup-script rendering of every node type.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import ray.autoscaler.gcp
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bootstrap.file_mounts import pack_file_mounts
from bootstrap.startup_script import render_startup_script
from infra.config import ConfigError, load_cluster_config
from ops.review.plan_engine import run_program

PROJECT_ROOT = Path(__file__).resolve().parents[1]
RAY_DEFAULTS = Path(ray.autoscaler.gcp.__file__).parent / "defaults.yaml"


def _seeds() -> list[tuple[str, dict[str, Any]]]:
    seeds = [(path.name, yaml.safe_load(path.read_text()))
             for path in sorted((PROJECT_ROOT / "stacks" / "clusters").glob("*.yaml"))]
    ray_defaults = yaml.safe_load(RAY_DEFAULTS.read_text())
    ray_defaults["provider"]["project_id"] = "my-gcp-project"  # Ray ships it null
    return [*seeds, ("ray:gcp/defaults.yaml", ray_defaults)]


SEEDS = _seeds()


@pytest.fixture(scope="module")
def odd_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Local paths a user might point file_mounts or ssh_private_key at by mistake."""
    base = tmp_path_factory.mktemp("odd")
    (base / "loop").symlink_to(base / "loop")
    (base / "dangling").symlink_to(base / "missing")
    os.mkfifo(base / "fifo")
    (base / "not-a-key").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot base64\n")
    (base / "binary").write_bytes(b"\xff\xfe\x00\x81" * 64)
    (base / "unreadable").write_text("secret")
    (base / "unreadable").chmod(0)
    (base / "empty").write_text("")
    (base / "dir").mkdir()
    return [str(base / name) for name in
            ("loop", "dangling", "fifo", "not-a-key", "binary", "unreadable", "empty", "dir")] \
        + ["/dev/null", "/dev/zero", "~/no-such-file", "", "relative/missing.pem"]


ODD_TEXT = ["\ud800", "\udfff x", "naïve", "名前", "\u202e", "a\x00b", "x" * 300, " ", "-",
            "$(reboot)", "'", "\n", "{", "*", "&a", "~", "null", "1e309"]
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70), st.sampled_from([10**400, 2**63, 10**5]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(ODD_TEXT),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)


def _locations(node: Any, path: tuple = (), seen: set[int] | None = None) -> list[tuple]:
    """Every path in the document, the document itself included; a shared (aliased) part is
    walked once, so a bomb inside a bomb is not enumerated leaf by leaf."""
    seen = set() if seen is None else seen
    found = [path]
    if isinstance(node, dict | list):
        if id(node) in seen:
            return found
        seen.add(id(node))
    items = node.items() if isinstance(node, dict) else \
        enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        found += _locations(child, (*path, key), seen)
    return found


def _get(document: Any, path: tuple) -> Any:
    for key in path:
        document = document[key]
    return document


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


def _alias_bomb(levels: int, width: int) -> Any:
    """Shared lists: dumped as YAML anchors and aliases, each level `width` times the last."""
    value: Any = ["lol"]
    for _ in range(levels):
        value = [value] * width
    return value


@st.composite
def mutated_texts(draw: st.DrawFn, odd_paths: list[str]) -> tuple[str, str]:
    name, seed = draw(st.sampled_from(SEEDS))
    document = copy.deepcopy(seed)
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 3]))):
        places = _locations(document)
        path = draw(st.sampled_from(places))
        parent_path, key = path[:-1], path[-1] if path else None
        if key is None:
            continue
        parent = _get(document, parent_path)
        operation = draw(st.sampled_from(
            ["delete", "replace", "wrap", "stringify", "nest", "alias", "bomb", "repeat",
             "flip"]))
        if operation == "repeat":  # in a list: e.g. a second disk
            if isinstance(parent, list):
                parent.append(copy.deepcopy(parent[key]))
        elif operation == "flip":
            if isinstance(parent[key], bool):
                parent[key] = not parent[key]
        elif operation == "delete":
            del parent[key]
        elif operation == "replace":
            parent[key] = draw(VALUES)
        elif operation == "wrap":
            parent[key] = draw(st.sampled_from([[parent[key]], {"x": parent[key]}]))
        elif operation == "stringify":
            parent[key] = str(parent[key])
        elif operation == "nest":
            parent[key] = _nested(draw(st.sampled_from([30, 120])))
        elif operation == "alias":  # one object twice: dumped as an anchor and an alias
            shared = copy.deepcopy(parent[key])
            parent[key] = [shared, shared] if draw(st.booleans()) else {"a": shared, "b": shared}
        elif operation == "bomb":  # last: a bomb in a bomb is billions of values to walk
            parent[key] = _alias_bomb(draw(st.integers(2, 5)), 8)
            break
    if isinstance(document, dict) and draw(st.booleans()):
        odd = draw(st.sampled_from(odd_paths))
        if draw(st.booleans()):
            document.setdefault("auth", {})
            if isinstance(document["auth"], dict):
                document["auth"][draw(st.sampled_from(["ssh_private_key", "ssh_public_key"]))] \
                    = odd
        else:
            target = draw(st.sampled_from(["/home/ray/x", "~/x", "/", "", "relative", "/tmp/ä"]))
            mounts = document.get("file_mounts")
            document["file_mounts"] = {**(mounts if isinstance(mounts, dict) else {}),
                                       target: odd}
    text = yaml.safe_dump(document, allow_unicode=True, sort_keys=False)
    edit = draw(st.sampled_from(["none"] * 6 + ["truncate", "tab", "colon"]))
    if edit != "none" and text:
        at = draw(st.integers(0, len(text) - 1))
        text = {"truncate": text[:at], "tab": text[:at] + "\t" + text[at:],
                "colon": text[:at] + ": :" + text[at:]}[edit]
    return name, text


def _assert_names_a_path(error: ConfigError, path: Path) -> None:
    """Each problem names its YAML path, or the message names the file itself."""
    assert error.problems, str(error)
    assert all(where for where, _ in error.problems) or str(path) in str(error), str(error)


def drive(path: Path) -> None:
    """Loader, then the program under the mock engine, then every node's startup script."""
    try:
        config = load_cluster_config(path)
        run_program({"ray-gcp:cluster": str(path)}, stack="mutation")
        mounts = pack_file_mounts(config)  # relative sources from the cwd, as the program reads
        for node_type in config.available_node_types:  # a node receives UTF-8 bytes
            render_startup_script(config, "worker", node_type, mounts).encode()
        render_startup_script(config, "head", config.head_node_type, mounts).encode()
    except ConfigError as error:
        _assert_names_a_path(error, path)


@pytest.fixture(scope="module")
def mutation_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mutation") / "cluster.yaml"


@pytest.mark.parametrize("name", [name for name, _ in SEEDS])
def test_every_seed_is_accepted_unchanged(name, mutation_file):
    seed = dict(SEEDS)[name]
    mutation_file.write_text(yaml.safe_dump(seed))
    drive(mutation_file)
    load_cluster_config(mutation_file)


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_cluster_yamls_end_accepted_or_in_a_path_named_config_error(
    data, odd_files, mutation_file
):
    _, text = data.draw(mutated_texts(odd_files))
    mutation_file.write_bytes(text.encode("utf-8", "surrogatepass"))
    drive(mutation_file)


def test_a_yaml_nested_past_the_parsers_depth_is_a_config_error_naming_the_file(mutation_file):
    seed = dict(SEEDS)["minimal.yaml"]
    mutation_file.write_text(yaml.safe_dump(seed) + "setup_commands: " + "[" * 50000
                             + "]" * 50000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply to read: flatten"):
        load_cluster_config(mutation_file)


def test_a_lone_surrogate_is_a_config_error_at_its_path(mutation_file):
    seed = copy.deepcopy(dict(SEEDS)["minimal.yaml"])
    seed["setup_commands"] = ["echo \ud800"]
    mutation_file.write_text(yaml.safe_dump(seed))  # dumped as the escape "\uD800"
    with pytest.raises(ConfigError, match=r"setup_commands\[0\]: holds a lone surrogate"):
        load_cluster_config(mutation_file)


def test_aliases_of_aliases_are_a_config_error_not_a_billion_values(mutation_file):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    mutation_file.write_text("\n".join([*lines, "setup_commands: *a8", ""]))
    with pytest.raises(ConfigError, match="more than 100000 values once its aliases"):
        load_cluster_config(mutation_file)


def test_numbers_past_64_bits_and_absurd_worker_counts_are_config_errors(mutation_file):
    seed = copy.deepcopy(dict(SEEDS)["full.yaml"])
    seed["max_workers"] = 2**70
    seed["available_node_types"]["ray_head_default"]["resources"] = {"CPU": 10**400}
    mutation_file.write_text(yaml.safe_dump(seed))
    with pytest.raises(ConfigError) as raised:
        load_cluster_config(mutation_file)
    assert "available_node_types.ray_head_default.resources.CPU: is too large" in str(raised.value)
    seed["available_node_types"]["ray_head_default"]["resources"] = {"CPU": 2}
    seed["max_workers"] = 2**40
    mutation_file.write_text(yaml.safe_dump(seed))
    with pytest.raises(ConfigError, match="max_workers: Input should be less than or equal to"):
        load_cluster_config(mutation_file)
