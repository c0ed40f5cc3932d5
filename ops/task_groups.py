"""`invoke --list` under headings (what each task is for), the task names users type unchanged.

invoke lists a collection's tasks alphabetically and groups only by sub-collection, whose
tasks it then names `group.task`: grouping that way would turn `invoke up` into `invoke
cluster.up`. The `invoke` binary's Program reads no setting for its listing (`--list-format`
is a flag, flat by default), so tasks.py, which invoke imports before it lists, hands its
groups to `list_in_groups`, which replaces Program's flat listing with one printing a heading
per group. Only the listing changes: task names, parsing, `--help TASK`, `--list-format
nested/json`, `--list NAMESPACE`, `--list-depth` and completion are invoke's own.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from invoke import Collection, Program, Task
from invoke.util import helpline

Groups = Sequence[tuple[str, Sequence[Task]]]

OTHER = "Other tasks"  # a task no group names still shows up, under this heading


def grouped_pairs(
    collection: Collection, groups: Groups
) -> list[tuple[str, list[tuple[str, str | None]]]] | None:
    """(heading, [(task name, help line)]) in the groups' order, or None when `collection`
    is not the one the groups describe (it has sub-collections, or none of their tasks)."""
    if collection.collections:
        return None
    remaining = dict(collection.tasks)
    sections = []
    for heading, tasks in groups:
        rows = []
        for task in tasks:
            name = collection.transform(task.name)
            if name in remaining:
                rows.append(_row(collection, name, remaining.pop(name)))
        if rows:
            sections.append((heading, rows))
    if not sections:
        return None
    if remaining:
        sections.append((OTHER, [_row(collection, name, task)
                                 for name, task in sorted(remaining.items())]))
    return sections


def _row(collection: Collection, name: str, task: Task) -> tuple[str, str | None]:
    aliases = sorted(map(collection.transform, task.aliases))
    return name + (f" ({', '.join(aliases)})" if aliases else ""), helpline(task)


def list_in_groups(groups: Groups) -> None:
    """Make invoke's flat `--list` of the whole collection print `groups` under headings."""
    flat_listing = getattr(Program.list_flat, "__wrapped__", Program.list_flat)

    @functools.wraps(flat_listing)
    def list_flat(program: Program) -> None:
        sections = None
        if program.list_root is None and not program.list_depth:
            sections = grouped_pairs(program.scoped_collection, groups)
        if sections is None:
            flat_listing(program)
            return
        width = max(len(name) for _, rows in sections for name, _ in rows)
        print(f"{program.task_list_opener()}:\n")
        for heading, rows in sections:
            print(f"{heading}:")
            program.print_columns([(name.ljust(width), help_line) for name, help_line in rows])
        if program.scoped_collection.default:
            print(f"Default task: {program.scoped_collection.default}\n")

    Program.list_flat = list_flat  # type: ignore[method-assign]
