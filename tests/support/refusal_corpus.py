"""The corpus of cluster YAMLs the config tests (tests/model/test_config_*.py) show refused, for the
differential test of `invoke up` against `invoke plan -c`
(tests/ops/lifecycle/test_up_checks_whole.py).

Harvested, not copied by hand: the config tests run with this module as a pytest plugin, which
wraps the loader (`parse_cluster_config`, `load_cluster_config`) and the offline program run
(`run_program`) and keeps every input one of them refused with a ConfigError, as YAML text,
with the test that gave it. Regenerate after adding config tests (about a minute):

    .venv/bin/python -m tests.support.refusal_corpus

It writes tests/support/corpus/refused_configs.yaml. (The random mutations of
tests/model/test_config_mutations.py are left out here: the differential test draws its own.)
"""

from __future__ import annotations

import copy
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CORPUS = PROJECT_ROOT / "tests" / "support" / "corpus" / "refused_configs.yaml"


class Harvest:
    """The refused inputs, in the order the tests gave them, once each."""

    def __init__(self) -> None:
        self.entries: list[dict[str, str]] = []
        self.test = ""

    def keep(self, text: str) -> None:
        if text.strip() and all(entry["yaml"] != text for entry in self.entries):
            self.entries.append({"from": self.test, "yaml": text})

    def keep_data(self, data: Any) -> None:
        if _has_nan(data):
            return  # a NaN is refused, but YAML cannot round-trip it as equal
        try:
            self.keep(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
        except (yaml.YAMLError, UnicodeEncodeError, TypeError, ValueError):
            return  # not writable as a YAML file (a lone surrogate, a Python object)

    def keep_file(self, path: Any) -> None:
        try:
            self.keep(Path(path).read_text())
        except (OSError, UnicodeDecodeError, TypeError, ValueError):
            return


def _has_nan(data: Any) -> bool:
    if isinstance(data, float):
        return math.isnan(data)
    if isinstance(data, dict):
        return any(_has_nan(value) for value in data.values())
    if isinstance(data, list):
        return any(_has_nan(value) for value in data)
    return False


def _refusals(original: Callable[..., Any], record: Callable[[Any], None],
              error: type[Exception]) -> Callable[..., Any]:
    def wrapper(data: Any, *args: Any, **kwargs: Any) -> Any:
        given = copy.deepcopy(data) if isinstance(data, (dict, list)) else data
        try:
            return original(data, *args, **kwargs)
        except error:
            record(given)
            raise
    return wrapper


class HarvestPlugin:
    def __init__(self, harvest: Harvest) -> None:
        self.harvest = harvest

    def pytest_configure(self, config: pytest.Config) -> None:
        import model.config
        import model.config.loader as loader
        import ops.review.plan_engine as plan_engine
        from model.config.errors import ConfigError

        harvest = self.harvest
        parse = _refusals(loader.parse_cluster_config, harvest.keep_data, ConfigError)
        load = _refusals(loader.load_cluster_config, harvest.keep_file, ConfigError)
        run = _refusals(plan_engine.run_program, self._keep_program_input, ConfigError)
        loader.parse_cluster_config = model.config.parse_cluster_config = parse
        loader.load_cluster_config = model.config.load_cluster_config = load
        plan_engine.run_program = run

    def _keep_program_input(self, config: dict[str, str]) -> None:
        if "ray-gcp:cluster" in config:
            self.harvest.keep_file(config["ray-gcp:cluster"])
        elif "ray-gcp:clusterConfig" in config:
            self.harvest.keep_data(json.loads(config["ray-gcp:clusterConfig"]))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):  # noqa: ANN201 - pytest's hook wrapper
        self.harvest.test = item.nodeid
        yield


def main() -> int:
    harvest = Harvest()
    config_tests = sorted(str(path.relative_to(PROJECT_ROOT))
                          for path in (PROJECT_ROOT / "tests" / "model").glob("test_config_*.py")
                          if path.name != "test_config_mutations.py")
    status = pytest.main(["-q", "-p", "no:cacheprovider", *config_tests],
                         plugins=[HarvestPlugin(harvest)])
    if status != 0:
        print(f"the config tests failed (status {status}): corpus not written", file=sys.stderr)
        return 1
    CORPUS.parent.mkdir(exist_ok=True)
    CORPUS.write_text(
        "# Harvested by `python -m tests.support.refusal_corpus` from "
        "tests/model/test_config_*.py: each a\n"
        "# cluster YAML the loader or the offline program refused. Do not edit by hand.\n"
        + yaml.safe_dump(harvest.entries, allow_unicode=True, sort_keys=False, width=100))
    print(f"{len(harvest.entries)} refused configs -> {CORPUS.relative_to(PROJECT_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
