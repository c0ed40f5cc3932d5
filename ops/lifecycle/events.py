"""Progress of a Pulumi operation: one line per resource step as the engine reports it.

A step that changes a running node says what it does to it (`ops.review.plan_effects`), so
`invoke up` and `invoke preview` word a change as `invoke diff` does; a policy pack's violation
is one line in the form `invoke plan` prints the offline review's.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

from ops.review.plan_effects import step_effect

if TYPE_CHECKING:
    from pulumi.automation.events import EngineEvent, PolicyEvent

COLOR_TAG = re.compile(r"<\{%[^%]*%\}>")
"""The engine's colour markup (`<{%fg 12%}>`, `<{%reset%}>`) in events it sends raw."""
NOT_RUN = "can't run policy "
"""pulumi-policy's message for a policy that read a value unknown during preview (`can't run
policy 'P' from policy pack 'K@v1' during preview: string value at .labels can't be known
during preview`): printed as `NOT RUN` with what was unknown."""


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
        self.violations: list[tuple[str, str, str, str]] = []
        """(level, policy, resource, message) of each policy event, once each."""

    def __call__(self, event: EngineEvent) -> None:
        self._track(event)
        line = self.render(event)
        if line:
            with self._lock:
                print(line, file=self.out, flush=True)

    def policies_only(self, event: EngineEvent) -> None:
        """Print only the policy violations (the preview before an up)."""
        if event.policy_event is not None:
            self(event)

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
        if event.policy_event is not None:
            return self._violation(event.policy_event)
        if event.summary_event is not None:
            summary = event.summary_event
            changes = ", ".join(
                f"{count} {getattr(op, 'value', op)}"
                for op, count in summary.resource_changes.items()
            )
            return f"summary: {changes or 'no changes'} in {summary.duration_seconds}s"
        return None

    def _violation(self, event: PolicyEvent) -> str | None:
        """`  policy   MANDATORY  private-nodes  <resource>: <message>`, the first time; the
        engine's message is the policy's description, then the rule's own message. A policy
        the preview could not run (it read a value not known yet, which pulumi-policy reports
        as an advisory) is `not run`, and no violation."""
        text = COLOR_TAG.sub("", event.message).strip().splitlines()
        message = text[-1] if text else ""
        level = event.enforcement_level
        if message.startswith(NOT_RUN):
            level, message = "not run", message.rpartition(" during preview: ")[2]
        resource = _urn_name(event.resource_urn) if event.resource_urn else "stack"
        found = (level, event.policy_name, resource, message)
        with self._lock:
            if found in self.violations:
                return None
            self.violations.append(found)
        return f"  policy   {level.upper():9}  {found[1]}  {resource}: {message}"


def _urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _elapsed(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
