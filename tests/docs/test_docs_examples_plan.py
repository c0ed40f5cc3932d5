"""Every YAML example in the docs is a real file, planned here as `invoke up -c` (or `-s` for a
stack file) plans it before it creates anything: the very checks `invoke plan` runs and the
spend cap's refusal, by `check_before_create` itself. A page shows such a file through the
snippets extension; a YAML block written into a page would be planned by nobody, so none may
be."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.docs_pages import DOCS, PROJECT_ROOT, fenced_blocks, included_files, pages

STACK_FILE = re.compile(r"Pulumi\.(?P<stack>[\w-]+)\.yaml")
EXAMPLES = sorted(f for f in included_files() if f.endswith((".yaml", ".yml")))


@pytest.fixture(autouse=True)
def _own_cache_and_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan keys the file_mounts archive with a secret it keeps in the cache folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("RAY_GCP_STATE_DIR", str(tmp_path / "state"))


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_yaml_a_page_shows_plans_as_up_would_plan_it(example: str) -> None:
    from ops.review.plan import check_before_create

    stack_file = STACK_FILE.fullmatch(Path(example).name)
    plan = check_before_create(stack_file["stack"]) if stack_file else \
        check_before_create(None, example)
    assert plan["resources"], example


def test_every_example_file_is_shown_on_a_page() -> None:
    files = {str(path.relative_to(PROJECT_ROOT)) for path in (DOCS / "examples").iterdir()}
    assert files - set(EXAMPLES) == set()


def test_no_page_writes_a_yaml_block_of_its_own() -> None:
    for name, text in pages().items():
        for language, lines in fenced_blocks(text):
            if language in ("yaml", "yml"):
                written = [line for line in lines if line.strip() and "--8<--" not in line]
                assert written == [], f"docs/{name}: a YAML block not from a file: {written[:3]}"


def test_the_checks_see_a_written_block_and_an_included_file() -> None:
    from tests.support.docs_pages import SNIPPET

    page = 'text\n```yaml\n--8<-- "docs/examples/a.yaml"\n```\n\n```yaml\nkey: 1\n```\n'
    assert fenced_blocks(page) == [("yaml", ['--8<-- "docs/examples/a.yaml"']),
                                   ("yaml", ["key: 1"])]
    assert SNIPPET.match('--8<-- "stacks/clusters/x.yaml:3:9"')[1] == "stacks/clusters/x.yaml:3:9"
