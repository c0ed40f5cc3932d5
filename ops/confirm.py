"""Asking before a task deletes or stops nodes, as `ray down` asks.

The task says what it will delete (`what`: the cluster, its project and zones, how many nodes
and resources), then asks on the terminal; `-y`/`--yes` skips the question. With no terminal to
ask on (a script, CI, stdin redirected) and no `-y`, nothing is deleted: one line says to add
`-y`. An answer other than y/yes deletes nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from ops.errors import OpsError

PROMPT = "Continue? [y/N]: "


def confirm(what: str, yes: bool, ask: Callable[[str], str] = input,
            out: TextIO | None = None, nothing: str = "deleted") -> None:
    """Print `what`, then go on only when `yes` or the user answers y; else OpsError saying
    nothing was `nothing` (deleted, adopted). `ask` other than `input` is an answerer of its
    own (a test's), asked whatever stdin is."""
    print(what, file=out or sys.stdout, flush=True)
    if yes:
        return
    if ask is input and not sys.stdin.isatty():
        raise OpsError(f"nothing {nothing}: no terminal to ask on; add -y (--yes) to go ahead "
                       "without the question")
    try:
        answer = ask(PROMPT)
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise OpsError(f"aborted: nothing was {nothing}")
