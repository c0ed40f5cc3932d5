"""Every task the docs and the README show as a command (`invoke NAME`, `ray-gcp NAME`, in a
code span or a code block) is one tasks.py has, so a renamed or removed task cannot leave a
page telling users to type it."""

from __future__ import annotations

import re

from invoke import Collection

from tests.support.docs_pages import PROJECT_ROOT, fenced_blocks, pages

# A command: at the start of a span or line, or after `&&`, `;`, `|` or a `$ ` prompt, maybe
# behind `./uv run [--locked] [--no-sync]` (not a name inside a quoted string).
NAMED = re.compile(r"(?:^|&&|;|\||\$)\s*(?:\./uv run(?: --locked)?(?: --no-sync)? )?"
                   r"(?:invoke|ray-gcp)\s+(?!-)([a-z][\w-]*)", re.MULTILINE)
SPAN = re.compile(r"`([^`\n]+)`")


def named_in(text: str) -> set[str]:
    """The tasks the commands in `text` name: in its code spans and code blocks."""
    code = SPAN.findall(text) + [line for language, lines in fenced_blocks(text)
                                 if language != "mermaid" for line in lines]
    return {name for command in code for name in NAMED.findall(command)}


def test_every_task_a_page_names_is_a_task() -> None:
    import tasks

    known = set(Collection.from_module(tasks).task_names)
    texts = {**pages(), "README.md": (PROJECT_ROOT / "README.md").read_text()}
    unknown = {name: sorted(named_in(text) - known) for name, text in texts.items()}
    assert {name: found for name, found in unknown.items() if found} == {}


def test_a_task_named_in_prose_or_a_command_is_found() -> None:
    text = ("run `invoke up -c x.yaml`, then the invoke tasks\n```sh\ncd p && ray-gcp attach\n"
            "./uv run --locked invoke local-up\ngcloud x --display-name=\"ray-gcp pull\"\n```\n")
    assert named_in(text) == {"up", "attach", "local-up"}
