"""A docs page the code sends users to (an error, a `--help` text, a comment: `docs/NAME.md`)
is a page the site has, so moving or renaming a page cannot leave a message pointing nowhere."""

from __future__ import annotations

import re

from tests.support.docs_pages import DOCS, PROJECT_ROOT

PAGE = re.compile(r"docs/([\w-]+\.md)")
CODE = ("model", "bootstrap", "infra", "policy", "ops")


def named_pages() -> dict[str, set[str]]:
    files = [PROJECT_ROOT / "tasks.py", *(path for room in CODE
                                          for path in (PROJECT_ROOT / room).rglob("*.py"))]
    return {str(path.relative_to(PROJECT_ROOT)): set(PAGE.findall(path.read_text()))
            for path in files}


def test_every_docs_page_the_code_names_is_there() -> None:
    missing = {name: sorted(page for page in pages if not (DOCS / page).is_file())
               for name, pages in named_pages().items()}
    assert {name: pages for name, pages in missing.items() if pages} == {}


def test_a_refused_permission_names_a_page_and_heading_that_are_there() -> None:
    from ops.errors import missing_role

    line = missing_role("Required 'compute.instances.delete' permission for 'x'")
    place = re.search(r'docs/([\w-]+\.md), "([^"]+)"', line)
    assert place, line
    assert f"\n## {place[2]}\n" in (DOCS / place[1]).read_text()
