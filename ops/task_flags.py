"""One flag vocabulary for every invoke task: a short letter always means the same long flag.

invoke gives each parameter the first free letter of its name, so `-s` ended up meaning
`--stack`, `--script` or `--source` depending on the task. Here short flags come only from
`SHORT_FLAGS` (parameter name -> letter, `ray`'s letter where `ray` has the flag); every other
parameter has its long flag alone. Tasks declared with this module's `task` follow it.
"""

from __future__ import annotations

from typing import Any

from invoke import Task
from invoke import task as invoke_task

# `ray` uses -p for --port-forward, -A for --all-nodes, -o for --output, -y for --yes, -N for
# attach's --new; -s is our --stack, -c a cluster YAML (`ray up` takes it as an argument).
SHORT_FLAGS: dict[str, str] = {
    "stack": "s",
    "config": "c",
    "port_forward": "p",
    "all_nodes": "A",
    "output": "o",
    "base": "b",
    "yes": "y",
    "new": "N",
}


class VocabularyTask(Task):
    """A Task whose short flags are exactly those `SHORT_FLAGS` assigns."""

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = super().arg_opts(name, default, taken_names)
        short = SHORT_FLAGS.get(name)
        if short:
            opts["names"].append(short)
        return opts


def task(*args: Any, **kwargs: Any) -> Any:
    """invoke's `@task`, with the project's short flags instead of invoke's automatic ones."""
    return invoke_task(*args, klass=VocabularyTask, auto_shortflags=False, **kwargs)
