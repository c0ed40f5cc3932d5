"""Progress of a Pulumi operation: one line per resource step as the engine reports it.

A step that changes a running node says what it does to it (`ops.review.plan_effects`), so
`invoke up` and `invoke preview` word a change as `invoke diff` does.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

from ops.review.plan_effects import step_effect

if TYPE_CHECKING:
    from pulumi.automation.events import EngineEvent


class EventPrinter:
    """Engine events -> one line per resource step, so long `up`s show progress as they go;
    while `ticking`, a line every interval names the steps still running and for how long (a
    TPU slice, or a queued one waiting for capacity, can take many minutes without an event)."""

    def __init__(self, out: TextIO = sys.stdout, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.out = out
        self.failed = 0
        self.clock = clock
        self.running: dict[str, float] = {}
        """Steps begun and not yet done or failed: resource name -> when they began."""
        self._lock = threading.Lock()

    def __call__(self, event: EngineEvent) -> None:
        self._track(event)
        line = self.render(event)
        if line:
            with self._lock:
                print(line, file=self.out, flush=True)

    def _track(self, event: EngineEvent) -> None:
        with self._lock:
            if event.resource_pre_event is not None:
                meta = event.resource_pre_event.metadata
                if meta.op.value != "same":
                    self.running[_urn_name(meta.urn)] = self.clock()
            elif event.res_outputs_event is not None:
                self.running.pop(_urn_name(event.res_outputs_event.metadata.urn), None)
            elif event.res_op_failed_event is not None:
                self.running.pop(_urn_name(event.res_op_failed_event.metadata.urn), None)

    def still_running(self) -> str | None:
        """`  running  a (4m05s), b (30s)`, longest first; None when no step is running."""
        with self._lock:
            now = self.clock()
            steps = sorted(self.running.items(), key=lambda item: item[1])
        if not steps:
            return None
        return "  running  " + ", ".join(
            f"{name} ({_elapsed(now - began)})" for name, began in steps
        )

    @contextlib.contextmanager
    def ticking(self, interval_s: float = 30.0) -> Iterator[None]:
        """Print `still_running` every `interval_s` while the body runs."""
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(interval_s):
                line = self.still_running()
                if line:
                    with self._lock:
                        print(line, file=self.out, flush=True)

        ticker = threading.Thread(target=tick, name="pulumi-progress", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()

    def render(self, event: EngineEvent) -> str | None:
        if event.resource_pre_event is not None:
            meta = event.resource_pre_event.metadata
            if meta.op.value == "same":
                return None
            line = f"  {meta.op.value:<8} {_urn_name(meta.urn)} ({meta.type})..."
            effect = step_effect(meta.type, meta.op.value, meta.detailed_diff, meta.diffs,
                                 meta.old, meta.new)
            return f"{line} {effect}" if effect else line
        if event.res_outputs_event is not None:
            meta = event.res_outputs_event.metadata
            if meta.op.value == "same":
                return None
            return f"  done     {_urn_name(meta.urn)}"
        if event.res_op_failed_event is not None:
            self.failed += 1
            return f"  FAILED   {_urn_name(event.res_op_failed_event.metadata.urn)}"
        if event.diagnostic_event is not None:
            diag = event.diagnostic_event
            if diag.severity in ("error", "warning") and not diag.ephemeral:
                return f"  {diag.severity}: {diag.message.strip()}"
            return None
        if event.summary_event is not None:
            summary = event.summary_event
            changes = ", ".join(
                f"{count} {getattr(op, 'value', op)}"
                for op, count in summary.resource_changes.items()
            )
            return f"summary: {changes or 'no changes'} in {summary.duration_seconds}s"
        return None


def _urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _elapsed(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
