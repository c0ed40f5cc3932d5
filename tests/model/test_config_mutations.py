"""Randomly broken cluster YAMLs end accepted or in one path-named ConfigError, never a crash.

Seeds are the shipped cluster YAMLs and Ray's own GCP `defaults.yaml` from the installed
wheel. Each example applies a few mutations and drives the file through the loader, the
program's plan under the mock engine and the startup-script rendering of every node type:
- anywhere in the document: keys deleted, values swapped for other types, huge numbers,
  unicode and lone surrogates, deep nesting, YAML aliases;
- at every field the model declares (walked from `ClusterConfig`'s annotations, so a new
  field is mutated as soon as it exists), values of its own type at their edges (huge or
  negative numbers, Unicode digits, odd Unicode, `~user` paths, dates) and of wrong types,
  nested deep, set whether or not the seed has the field;
- file_mounts and `ssh_private_key` pointing at symlink loops, device files, FIFOs,
  directories and malformed keys;
- the YAML text: a key given twice, broken syntax.

2,000 examples a run (`MUTATION_EXAMPLES=200` for a quick local loop) in 16 shards, each of
its own fixed seed so every run tries the same ones, and the suite's workers share them out.
The fast tier runs the first FAST_SHARDS (125 examples); the rest are marked `slow` (about
10-15 s each) and run in the whole suite.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import hypothesis
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bootstrap.file_mounts import pack_file_mounts
from bootstrap.startup_script import render_startup_script
from model.config import ConfigError, load_cluster_config
from ops.review.plan_engine import run_program
from tests.support.yaml_mutations import SEEDS, mutated_texts

EXAMPLES = int(os.environ.get("MUTATION_EXAMPLES", "2000"))
SHARDS = 16
FAST_SHARDS = 1


@pytest.fixture
def odd_files(tmp_path: Path) -> list[str]:
    """Local paths a user might point file_mounts or ssh_private_key at by mistake."""
    base = tmp_path / "odd"
    base.mkdir()
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




def _assert_names_a_path(error: ConfigError, path: Path) -> None:
    """Each problem names its YAML path, or the message names the file itself."""
    assert error.problems, str(error)
    assert all(where for where, _ in error.problems) or str(path) in str(error), str(error)


def drive(path: Path, programs_run: set[str]) -> None:
    """Loader, then the program under the mock engine, then every node's startup script.

    `programs_run`: the validated configs (with their warnings) the program already ran on in
    this shard, which it skips. The program reads the YAML only through the loader, and the
    files the config names, which stay the same within a test: a second run on an equal config
    is the same run. Two of five accepted examples validate to one already run (shards 3 and
    4: 40 program runs, 24 configs), and a run is 0.3 CPU-s."""
    try:
        config = load_cluster_config(path)
        validated = config.model_dump_json() + repr(config.warnings)
        if validated not in programs_run:
            run_program({"ray-gcp:cluster": str(path)}, stack="mutation")
            programs_run.add(validated)
        packed = pack_file_mounts(config)  # relative sources from the cwd, as the program reads
        mounts = packed.keyed("mutation-key") if packed is not None else None
        for node_type in config.available_node_types:  # a node receives UTF-8 bytes
            render_startup_script(config, "worker", node_type, mounts).encode()
        render_startup_script(config, "head", config.head_node_type, mounts).encode()
    except ConfigError as error:
        _assert_names_a_path(error, path)


@pytest.fixture
def mutation_file(tmp_path: Path) -> Path:
    return tmp_path / "cluster.yaml"


@pytest.mark.parametrize("name", [name for name, _ in SEEDS])
def test_every_seed_is_accepted_unchanged(name, mutation_file):
    seed = dict(SEEDS)[name]
    mutation_file.write_text(yaml.safe_dump(seed))
    drive(mutation_file, set())
    load_cluster_config(mutation_file)


@pytest.mark.parametrize("shard", [shard if shard < FAST_SHARDS else
                                   pytest.param(shard, marks=pytest.mark.slow)
                                   for shard in range(SHARDS)])
def test_mutated_cluster_yamls_end_accepted_or_in_a_path_named_config_error(
    shard, odd_files, mutation_file
):
    programs_run: set[str] = set()

    @hypothesis.seed(shard)
    @settings(max_examples=EXAMPLES // SHARDS, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def mutated(data: st.DataObject) -> None:
        _, text = data.draw(mutated_texts(odd_files))
        mutation_file.write_bytes(text.encode("utf-8", "surrogatepass"))
        drive(mutation_file, programs_run)

    mutated()


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
