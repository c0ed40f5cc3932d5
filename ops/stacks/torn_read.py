"""A read of a stack's state that met another run writing it, read again.

On the file backend (a `file://` folder or the local one `up -c` keeps) gocloud's fileblob
rewrites each state object's `.attrs` sidecar in place (attrs.go setAttrs: os.Create, then the
JSON), so a CLI run reading the state at that moment can decode it empty: pulumi then says
"failed to load checkpoint: EOF" and has changed nothing. Two tasks on one stack at once meet
it (two first `up`s of a new stack). Imports nothing of ours.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO, TypeVar

TORN_READ = "failed to load checkpoint: EOF"
TRIES = 10
WAIT_S = 0.5
SAID = "the stack's state was being written by another run as this one read it: reading it again"

T = TypeVar("T")


def reading_again(call: Callable[[], T], out: TextIO | None = None,
                  sleep: Callable[[float], None] = time.sleep) -> T:
    """`call`, run again (after saying so once, on `out`, else stdout) while it fails with
    TORN_READ in its error; up to TRIES runs, WAIT_S apart."""
    for tries in range(1, TRIES + 1):
        try:
            return call()
        except Exception as failed:
            if TORN_READ not in str(failed) or tries == TRIES:
                raise
            if tries == 1:
                print(SAID, file=out or sys.stdout, flush=True)
            sleep(WAIT_S)
    raise AssertionError("unreachable")
