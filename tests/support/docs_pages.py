"""The docs site (docs/, mkdocs.yml) as the tests read it: a page, one section of it, the cells
of its tables, the files its pages include."""

from __future__ import annotations

import re
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DOCS = PROJECT_ROOT / "docs"
# pymdownx.snippets: a line `--8<-- "path"` (from the repository's root, mkdocs.yml's
# base_path), optionally `path:start:end` or `path:section`.
SNIPPET = re.compile(r'^\s*-{1,}8<-{1,}\s+"([^"]+)"\s*$')
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


def page(name: str) -> str:
    return (DOCS / name).read_text()


def pages() -> dict[str, str]:
    """Every page of the site, by its path under docs/."""
    return {str(path.relative_to(DOCS)): path.read_text() for path in sorted(DOCS.rglob("*.md"))}


def section(name: str, heading: str) -> str:
    """The text of page `name` under the heading line `heading` (e.g. `### You, running the
    tasks`), up to the next heading of the same level or above."""
    text = page(name)
    marker = f"\n{heading}\n"
    assert marker in text, f"docs/{name} has no heading {heading!r}"
    after = text.split(marker, 1)[1]
    level = len(heading) - len(heading.lstrip("#"))
    following = re.search(rf"^#{{1,{level}}} ", after, re.MULTILINE)
    return after[:following.start()] if following else after


def cells(row: str) -> list[str]:
    """A table row's cells, split as Python-Markdown's tables split them: at a `|` that is
    neither escaped nor inside a code span."""
    found, cell, code = [], "", False
    for index, char in enumerate(row):
        if char == "`":
            code = not code
        if char == "|" and not code and row[index - 1:index] != "\\":
            found.append(cell.strip())
            cell = ""
        else:
            cell += char
    return found[1:]


def table_rows(text: str) -> list[list[str]]:
    """The cells of every table row in `text` (header included, the `---` line left out)."""
    rows = [cells(line) for line in text.splitlines() if line.startswith("|")]
    return [row for row in rows if not all(set(cell) <= set("-: ") for cell in row)]


def fenced_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of every fenced code block in a page."""
    blocks: list[tuple[str, list[str]]] = []
    fence = ""
    for line in text.splitlines():
        opened = FENCE.match(line)
        if not fence and opened:
            fence, language, body = opened[2], opened[3], []
        elif fence and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            blocks.append((language, body))
            fence = ""
        elif fence:
            body.append(line)
    return blocks


def included_files() -> set[str]:
    """Every file a page includes with the snippets extension, as a path from the root."""
    return {found[1].split(":", 1)[0] for text in pages().values() for line in text.splitlines()
            if (found := SNIPPET.match(line))}
