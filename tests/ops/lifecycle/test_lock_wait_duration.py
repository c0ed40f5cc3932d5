"""`--wait[=DURATION]`'s duration (ops/lifecycle/lock_wait.py `wait_seconds`): alone it is 30
minutes, a number is seconds, `s`/`m`/`h` name the unit, anything else is one line saying
what to give. The waiting itself runs against the engine: tests/engine/test_engine_lock_wait.py."""

from __future__ import annotations

import pytest

from ops.errors import OpsError
from ops.lifecycle.lock_wait import DEFAULT_WAIT_S, wait_seconds


@pytest.mark.parametrize(("flag", "seconds"), [
    (None, None), (False, None), (True, DEFAULT_WAIT_S), ("300", 300.0), ("90s", 90.0),
    ("10m", 600.0), ("1.5h", 5400.0), (" 2M ", 120.0),
])
def test_a_wait_flag_is_its_duration_in_seconds(flag: object, seconds: float | None) -> None:
    assert wait_seconds(flag) == seconds


@pytest.mark.parametrize("flag", ["soon", "10 min", "-5", "5d", ""])
def test_a_wait_that_is_no_duration_is_one_line(flag: str) -> None:
    with pytest.raises(OpsError, match=r"^--wait=.*: give a duration such as 90s, 10m or 1h"):
        wait_seconds(flag)
