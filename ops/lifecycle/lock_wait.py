"""`--wait[=DURATION]`: a run that meets its stack's lock queues behind it instead of ending.

Without it, `up`, `down`, `scale` and `refresh` of a stack another run holds end in one line
(ops/lifecycle/locks.py). With it, as a team's CI job queued behind a colleague's run wants,
the run says once who holds the lock (user, host, pid, their command when it runs on this
machine, since when), polls the backend's lock files (`current_locks`, which takes nothing)
until they are gone, then runs; the engine's own lock stays the judge, so a run that loses the
race to another waiter queues again. A lock whose holder is known gone (a killed run on this
machine) never clears by itself: that one line, with `invoke unlock`, comes at once. Past the
duration it gives up with the same one line, saying how long it waited; Ctrl-C while waiting
leaves nothing (it held nothing).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

from ops.errors import OpsError
from ops.lifecycle.locks import Lock, StackLocked, current_locks, locked_error

DEFAULT_WAIT_S = 30 * 60.0
POLL_S = 2.0
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}
_DURATION = re.compile(r"^(?P<amount>\d+(\.\d+)?)(?P<unit>[smh]?)$")
_WAIT: contextvars.ContextVar[float | None] = contextvars.ContextVar("lock_wait", default=None)


def wait_seconds(flag: object) -> float | None:
    """`--wait` (True: DEFAULT_WAIT_S), `--wait=90s`/`10m`/`1h`/`300` (seconds), or not given
    (None, False): how long a run may queue behind its stack's lock."""
    if flag is None or flag is False:
        return None
    if flag is True:
        return DEFAULT_WAIT_S
    found = _DURATION.match(str(flag).strip().lower())
    if not found:
        raise OpsError(f"--wait={flag}: give a duration such as 90s, 10m or 1h (or --wait "
                       f"alone for {DEFAULT_WAIT_S / 60:.0f} minutes)")
    return float(found["amount"]) * _UNITS[found["unit"]]


@contextlib.contextmanager
def lock_wait(seconds: float | None) -> Iterator[None]:
    """The runs inside may queue behind their stack's lock for `seconds` (None: they may not)."""
    token = _WAIT.set(seconds)
    try:
        yield
    finally:
        _WAIT.reset(token)


def _stale(locks: list[Lock]) -> bool:
    return bool(locks) and all(lock.running is False for lock in locks)


def _shown(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def queue_behind_lock(stack: str, operation: str, attempt: Callable[[], None],
                      out: TextIO, clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> None:
    """Run `attempt` (one engine operation of `stack`); under `lock_wait`, wait for the lock
    first and again whenever the engine meets it (module docstring)."""
    wait = _WAIT.get()
    if wait is None:
        attempt()
        return
    waiting = _Waiting(stack, operation, wait, clock() + wait, out, clock, sleep)
    while True:
        with _nothing_done_on_ctrl_c(stack):
            waiting.until_free()
        try:
            attempt()
            return
        except StackLocked as met:  # another waiter took it first, or the locks went unlisted
            if _stale(met.locks) or clock() >= waiting.give_up_at:
                raise
            waiting.tell(met.locks)
        with _nothing_done_on_ctrl_c(stack):
            sleep(POLL_S)


@contextlib.contextmanager
def _nothing_done_on_ctrl_c(stack: str) -> Iterator[None]:
    try:
        yield
    except KeyboardInterrupt:
        raise OpsError(f"interrupted while waiting for the lock of stack {stack!r}: nothing "
                       "was done", exit_code=130) from None


@dataclass
class _Waiting:
    stack: str
    operation: str
    wait: float
    give_up_at: float
    out: TextIO
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    said: set[tuple[str, int, str]] = field(default_factory=set)

    def tell(self, locks: list[Lock]) -> None:
        """One line per holder met, the first time it is met."""
        for lock in locks:
            if (lock.host, lock.pid, lock.since) not in self.said:
                self.said.add((lock.host, lock.pid, lock.since))
                print(f"waiting up to {_shown(self.wait)} for stack {self.stack!r}: it is "
                      f"locked {lock.describe()}", file=self.out, flush=True)

    def until_free(self) -> None:
        """Poll the backend's lock files until there are none; a stale lock, or the end of
        the wait, is the lock's one line."""
        locks = current_locks(self.stack) or []
        while locks:
            if _stale(locks):
                raise locked_error(self.stack, self.operation, locks)
            self.tell(locks)
            if self.clock() >= self.give_up_at:
                raise StackLocked(f"{locked_error(self.stack, self.operation, locks)} (waited "
                                  f"{_shown(self.wait)} for it)", locks)
            self.sleep(min(POLL_S, max(0.0, self.give_up_at - self.clock())))
            locks = current_locks(self.stack) or []
