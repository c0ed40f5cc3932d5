"""One flag vocabulary: across all tasks a short flag always stands for the same long flag,
and every flag that takes a value shows a placeholder for it."""

from __future__ import annotations

import functools
import importlib.util
import re
from types import ModuleType

from invoke import Collection
from invoke.parser import ParserContext

from model.stack_config import PROJECT_ROOT
from ops.task_flags import SHORT_FLAGS


@functools.cache
def _fresh_tasks() -> ModuleType:
    """A copy of tasks.py of its own: invoke pops each help text when it builds a task's
    arguments, so the `tasks` module another test has inspected has none left to show."""
    spec = importlib.util.spec_from_file_location("tasks_for_flag_tests", PROJECT_ROOT / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _contexts() -> list[ParserContext]:
    """What `invoke --help TASK` reads; built once (invoke hands each help text out once)."""
    return Collection.from_module(_fresh_tasks()).to_contexts()


def _task_flags() -> dict[str, list[list[str]]]:
    """Task name -> the flag names of each of its arguments."""
    return {context.name: [sorted(arg.names) for arg in context.flags.values()]
            for context in _contexts()}


def test_no_short_flag_means_two_different_long_flags_across_tasks():
    meanings: dict[str, set[str]] = {}
    for flag_names in _task_flags().values():
        for names in flag_names:
            longs = [name for name in names if len(name) > 1]
            for short in (name for name in names if len(name) == 1):
                meanings.setdefault(short, set()).update(longs)
    clashes = {short: longs for short, longs in meanings.items() if len(longs) > 1}
    assert clashes == {}
    assert meanings["s"] == {"stack"}


def test_every_task_with_a_stack_takes_dash_s():
    for task, flag_names in _task_flags().items():
        for names in flag_names:
            if "stack" in names:
                assert "s" in names, task


def test_short_flags_come_only_from_the_vocabulary():
    allowed = {(long.replace("_", "-"), short) for long, short in SHORT_FLAGS.items()}
    for flag_names in _task_flags().values():
        for names in flag_names:
            shorts = [name for name in names if len(name) == 1]
            longs = [name for name in names if len(name) > 1]
            assert all((longs[0], short) in allowed for short in shorts), names


def test_flags_that_take_a_value_show_a_placeholder_in_help():
    for context in _contexts():
        for flag, argument in context.flags.items():
            spec, help_text = context.help_for(flag)
            if argument.kind is list:  # invoke prints no placeholder for these: the help does
                assert re.match(r"[A-Z]+\b", help_text), (context.name, spec)
            elif argument.takes_value:
                assert "=" in spec, (context.name, spec)


def test_task_descriptions_in_the_list_are_one_full_sentence_on_one_line():
    # `invoke --list` on 80 columns leaves about 60 for the description; details go below.
    for name, task in Collection.from_module(_fresh_tasks()).tasks.items():
        first_line = (task.__doc__ or "").strip().splitlines()[0]
        assert first_line.endswith("."), name
        assert len(first_line) <= 60, name
