"""`invoke --list` shows every task once, under the heading of what it is for, and the flat
names users type (`invoke up`, `invoke get-head-ip`) still run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from invoke import Collection, Task

from ops.task_groups import OTHER, grouped_pairs

PROJECT_ROOT = Path(__file__).resolve().parents[2]
RUNNER = PROJECT_ROOT / "tests" / "support" / "task_runner.py"


def invoke(*args: str) -> subprocess.CompletedProcess[str]:
    """The `invoke` binary, from the project root, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=True)


def listed_sections(listing: str) -> dict[str, list[str]]:
    """Heading -> the task names under it, read from `invoke --list`'s output."""
    sections: dict[str, list[str]] = {}
    for line in listing.splitlines()[2:]:  # "Available tasks:" and a blank line
        if line and not line.startswith(" "):
            heading = line.removesuffix(":")
            sections[heading] = []
        elif line.strip():
            sections[heading].append(line.split()[0])
    return sections


def task_names() -> set[str]:
    import tasks

    return set(Collection.from_module(tasks).task_names)


def test_list_shows_every_task_exactly_once_under_its_heading():
    import tasks

    sections = listed_sections(invoke("--list").stdout)
    assert list(sections) == [heading for heading, _ in tasks.TASK_GROUPS]
    listed = [name for names in sections.values() for name in names]
    assert sorted(listed) == sorted(task_names())
    assert sections["Cluster lifecycle"][:3] == ["up", "preview", "refresh"]
    assert "get-head-ip" in sections["Nodes and sessions"]
    assert "cluster-dump" in sections["Health and debugging"]


def test_every_task_belongs_to_a_group():
    import tasks

    grouped = [task for _, group in tasks.TASK_GROUPS for task in group]
    assert len(grouped) == len(set(grouped))
    assert {Collection().transform(task.name) for task in grouped} == task_names()


def test_every_flat_name_still_runs():
    names = sorted(task_names())
    # the names the `invoke` binary's own parser accepts (what shell completion offers)
    assert invoke("--complete", "--", "invoke").stdout.split() == names
    runs = json.loads(subprocess.run(
        [sys.executable, str(RUNNER), json.dumps([["--help", name] for name in names])],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, check=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},  # tasks.py is not installed
    ).stdout)
    for name, run in zip(names, runs, strict=True):
        assert run["code"] == 0, (name, run["stderr"])
        assert f"Usage: invoke [--core-opts] {name} " in run["stdout"]


def test_other_list_formats_stay_invokes_own():
    names = {task["name"] for task in json.loads(invoke("--list", "-F", "json").stdout)["tasks"]}
    assert names == task_names()
    nested = invoke("--list", "-F", "nested").stdout
    assert "Cluster lifecycle:" not in nested and "  up " in nested


def test_a_task_no_group_names_is_listed_under_other_tasks():
    def make(name: str) -> Task:
        def body(c):
            """Help line."""

        body.__name__ = name
        return Task(body)

    first, second, stray = make("first"), make("second"), make("stray")
    collection = Collection(first, second, stray)
    sections = grouped_pairs(collection, [("Group", (second, first))])
    assert sections == [("Group", [("second", "Help line."), ("first", "Help line.")]),
                        (OTHER, [("stray", "Help line.")])]
    assert grouped_pairs(collection, [("Elsewhere", (make("absent"),))]) is None
