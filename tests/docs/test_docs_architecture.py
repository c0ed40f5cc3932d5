"""The architecture page's picture (docs/architecture.md, a mermaid flowchart Material renders)
draws every package of the project and every room of ops/, each by its folder's name, and
nothing that is not there."""

from __future__ import annotations

import re

from tests.support.docs_pages import PROJECT_ROOT, fenced_blocks, page

LABEL = re.compile(r'\["([^"<]+?)(?:<br/>|")')


def drawn() -> set[str]:
    (picture,) = [lines for language, lines in fenced_blocks(page("architecture.md"))
                  if language == "mermaid"]
    return {label.strip() for line in picture for label in LABEL.findall(line)}


def test_the_picture_draws_every_package_and_ops_room() -> None:
    packages = {f"{init.parent.name}/" for init in PROJECT_ROOT.glob("*/__init__.py")
                if init.parent.name != "tests"}  # the house the product lives in, not its tests
    rooms = {f"ops/{init.parent.name}/" for init in PROJECT_ROOT.glob("ops/*/__init__.py")}
    assert (packages | rooms | {"tasks.py"}) - drawn() == set()


def test_every_folder_the_picture_draws_is_there() -> None:
    folders = {label for label in drawn() if label.endswith("/")}
    assert {folder for folder in folders if not (PROJECT_ROOT / folder).is_dir()} == set()
