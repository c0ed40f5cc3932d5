"""The adoption tests' user: Ray's launcher and the tool, both at one fake cloud."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.compute import FakeComputeServer
from tests.support.adoption import ray_user_at


@pytest.fixture
def ray_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[tuple[dict[str, str], FakeComputeServer]]:
    yield from ray_user_at(tmp_path / "home", tmp_path / "state-dir", monkeypatch)
