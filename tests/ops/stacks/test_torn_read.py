"""`reading_again`: a call that met a state write in progress is run again, said once; any
other failure, and the last try's, is raised as it came
(tests/engine/test_engine_torn_read.py: through the pinned CLI)."""

from __future__ import annotations

import io

import pytest

from ops.errors import OpsError
from ops.stacks.torn_read import SAID, TORN_READ, TRIES, reading_again


def test_a_torn_read_is_read_again_and_said_once():
    calls: list[int] = []
    waits: list[float] = []

    def call() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OpsError(f"pulumi up of stack 's' failed: stderr: error: {TORN_READ}")
        return "state"

    out = io.StringIO()
    assert reading_again(call, out, sleep=waits.append) == "state"
    assert len(calls) == 3 and len(waits) == 2
    assert out.getvalue() == SAID + "\n"


def test_other_failures_and_the_last_torn_read_are_raised():
    def other() -> None:
        raise OpsError("pulumi up of stack 's' failed: quota exceeded")

    with pytest.raises(OpsError, match="quota exceeded"):
        reading_again(other, io.StringIO(), sleep=lambda _: pytest.fail("waited"))
    tries: list[int] = []

    def torn() -> None:
        tries.append(1)
        raise RuntimeError(TORN_READ)

    with pytest.raises(RuntimeError, match=TORN_READ):
        reading_again(torn, io.StringIO(), sleep=lambda _: None)
    assert len(tries) == TRIES
