"""The day-two table (docs/day-two.md, "The tasks") names every task, each next to the `ray`
command it replaces (or "—"), with flags both commands really have: ours from tasks.py's
collection, `ray`'s from the click commands in Ray's wheel."""

from __future__ import annotations

import re

from invoke import Collection

from tests.support.docs_pages import section, table_rows

FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
SPAN = re.compile(r"`([^`]+)`")


def day_two_rows() -> list[tuple[str, str]]:
    """(task cell, replaces cell) of each row of the table under `## The tasks`."""
    cells = table_rows(section("day-two.md", "## The tasks"))
    assert cells[0] == ["task", "replaces", "what it does"]
    return [(task, replaces) for task, replaces, _ in cells[1:]]


def named_tasks(cell: str) -> dict[str, list[str]]:
    """Task name -> the flags the cell shows for it. A span is `invoke NAME ...` or `NAME ...`;
    one that starts with a flag (`--cancel`) continues the task before it."""
    tasks: dict[str, list[str]] = {}
    name = ""
    for span in SPAN.findall(cell):
        words = span.removeprefix("invoke ").split()
        if not words[0].startswith("-"):
            name = words[0]
            tasks[name] = []
        tasks[name] += FLAG.findall(span.split(" ", 1)[1] if " " in span else "")
    return tasks


def task_flags() -> dict[str, set[str]]:
    """Each task's flags as `invoke --help TASK` shows them, `--no-X` forms included."""
    import tasks

    flags = {}
    for context in Collection.from_module(tasks).to_contexts():
        names = [name for argument in context.args.values() for name in argument.names]
        flags[context.name] = {("-" if len(name) == 1 else "--") + name for name in names}
        flags[context.name] |= set(context.inverse_flags)
    return flags


def test_the_table_names_every_task_once_and_no_other():
    named = [name for cell, _ in day_two_rows() for name in named_tasks(cell)]
    assert len(named) == len(set(named))
    assert set(named) == set(task_flags())


def test_every_flag_the_table_shows_for_a_task_is_one_it_takes():
    flags = task_flags()
    for cell, _ in day_two_rows():
        for name, shown in named_tasks(cell).items():
            assert set(shown) <= flags[name], (name, set(shown) - flags[name])


def test_every_row_says_what_it_replaces_in_rays_own_words():
    from ray.scripts.scripts import cli as ray_cli
    for cell, replaces in day_two_rows():
        assert replaces, f"{cell}: say which `ray` command it replaces, or —"
        if replaces == "—":
            continue
        commands = [span for span in SPAN.findall(replaces) if span.startswith("ray ")]
        assert commands, (cell, replaces)
        for command in commands:
            verb, *rest = command.removeprefix("ray ").split(maxsplit=1)
            assert verb in ray_cli.commands, command
            ray_flags = {name for param in ray_cli.commands[verb].params
                         for name in param.opts + param.secondary_opts}
            assert set(FLAG.findall(" ".join(rest))) <= ray_flags, command
