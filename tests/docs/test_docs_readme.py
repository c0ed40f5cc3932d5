"""The README is what a newcomer reads first, and short: under 200 lines, linking every page of
the docs site, each link to a page (and heading) that is there."""

from __future__ import annotations

import re

import yaml
from markdown.extensions.toc import slugify

from tests.support.docs_pages import DOCS, PROJECT_ROOT, page

LINK = re.compile(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)


def readme() -> str:
    return (PROJECT_ROOT / "README.md").read_text()


def nav_pages() -> set[str]:
    """The pages mkdocs.yml's nav lists (its python tags left unread)."""
    text = (PROJECT_ROOT / "mkdocs.yml").read_text().split("\nnav:\n", 1)[1]
    return {path for entry in yaml.safe_load(text) for path in entry.values()}


def anchors(name: str) -> set[str]:
    """The ids mkdocs' toc gives the page's headings (code spans lose their backticks)."""
    return {slugify(heading.replace("`", ""), "-") for heading in HEADING.findall(page(name))}


def test_the_readme_stays_under_200_lines() -> None:
    assert len(readme().splitlines()) < 200


def test_the_readme_links_every_page_of_the_site() -> None:
    linked = {path.removeprefix("docs/") for path, _ in LINK.findall(readme())}
    assert nav_pages() - linked == set()


def test_every_docs_link_in_the_readme_reaches_its_page_and_heading() -> None:
    for path, anchor in LINK.findall(readme()):
        assert (PROJECT_ROOT / path).is_file(), path
        if anchor:
            assert anchor in anchors(str((PROJECT_ROOT / path).relative_to(DOCS))), \
                f"{path}#{anchor}"
