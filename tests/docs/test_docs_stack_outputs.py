"""docs/stack-references.md lists every output a stack of this project exports, with its type
and whether it is a secret, exactly as the program exports them (planned, for stacks of
every kind); tests/engine/test_engine_network_stack.py checks a created stack's too."""

from __future__ import annotations

import pytest

from ops.review.plan_engine import SECRET_MASK
from tests.support.program_runs import run_stack
from tests.support.stack_outputs_doc import documented_outputs


@pytest.mark.slow  # a program run per stack: a minute and more on a loaded machine
@pytest.mark.parametrize("stack", ["minimal", "full", "tpu", "private"])
def test_the_documented_outputs_are_what_the_program_exports(stack: str) -> None:
    documented = documented_outputs()
    exported = run_stack(stack).outputs
    assert sorted(exported) == sorted(documented)
    for name, output in documented.items():
        value = exported[name]
        assert (value == SECRET_MASK) == output.secret, name
        if not output.secret:
            assert isinstance(value, output.types) and not (
                bool not in output.types and isinstance(value, bool)), (name, value)
