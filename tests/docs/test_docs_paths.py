"""Every file or folder of the repository a docs page (or the README) names in a code span is
there: a module moved to another floor, a renamed test or a deleted example cannot leave a page
sending readers to nothing. Paths at run time (`~/...`, `.ray-gcp/...`, `/var/log/...`) are
not the repository's and are not checked."""

from __future__ import annotations

import re

from tests.support.docs_pages import PROJECT_ROOT, pages

ROOTS = ("bench", "bootstrap", "docs", "engine", "infra", "model", "ops", "policy", "stacks",
         "tests", ".ci", ".github")
PATH = re.compile(rf"`((?:{'|'.join(re.escape(root) for root in ROOTS)})/[\w./-]*)`")


def named_paths(text: str) -> set[str]:
    return set(PATH.findall(text))


def test_every_repository_path_the_docs_name_is_there() -> None:
    texts = {**pages(), "README.md": (PROJECT_ROOT / "README.md").read_text()}
    missing = {name: sorted(path for path in named_paths(text)
                            if not (PROJECT_ROOT / path).exists())
               for name, text in texts.items()}
    assert {name: paths for name, paths in missing.items() if paths} == {}


def test_a_repository_path_is_told_from_a_path_at_run_time() -> None:
    text = "`model/plan.py`, `ops/remote/`, `~/.ray/auth_token`, `.ray-gcp/<stack>/known_hosts`"
    assert named_paths(text) == {"model/plan.py", "ops/remote/"}
