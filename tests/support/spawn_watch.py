"""What a test started: the real Ray, sshd or pulumi engine processes this test process spawned
while the test ran, seen through Python's audit events (`subprocess.Popen`, `os.posix_spawn`;
https://docs.python.org/3/library/audit_events.html), so tests/conftest.py can fail a test that
starts one of them without the marker that keeps it out of the fast tier.

Only the test process's own spawns are seen, by their program: `ray` (and the gcs_server and
raylet `ray.init()` starts), `sshd`, the engine (`pulumi` and what `invoke engine` installed
beside it, tests/support/engine_driver.py). Not what a child starts in turn (`invoke up`
running the engine, a local cluster's node scripts starting Ray): the fixture is then the only
mark (`ray_processes`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

RAY_PROGRAMS = ("ray", "gcs_server", "raylet")
SPAWN_EVENTS = frozenset(("subprocess.Popen", "os.posix_spawn"))
ENGINE_FOLDER = "/ray-gcp-pulumi/engine/"  # ops/engine.py's engine_root: its plugins too


def kind_of(argv: Sequence[Any]) -> str | None:
    """`ray`, `sshd` or `engine` for a command line that starts one, else None."""
    words = [os.fsdecode(word) if isinstance(word, bytes) else str(word) for word in argv]
    if not words:
        return None
    program = os.path.basename(words[0])
    if program == "sshd":
        return "sshd"
    if program in RAY_PROGRAMS or any("ray start" in word for word in words):
        return "ray"
    if program == "pulumi" or ENGINE_FOLDER in words[0] or any(
            word.endswith("engine_driver") for word in words):
        return "engine"
    return None


class SpawnWatch:
    """An audit hook (installed once: hooks cannot be removed) recording, between `begin` and
    `end`, the first command line of each kind this process spawned."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.watching = False
        self.seen: dict[str, str] = {}

    def begin(self) -> None:
        self.seen, self.watching = {}, True

    def end(self) -> None:
        self.watching = False

    def started(self) -> dict[str, str]:
        """kind -> the first command line of that kind the test spawned."""
        return dict(self.seen)

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        # Called for every audit event the process raises (a program run under the mocks
        # raises some 65,000, nearly all `object.__getattr__` from pulumi's stack traces):
        # the event's name is the one test cheap enough to come first.
        if event not in SPAWN_EVENTS or not self.watching or os.getpid() != self.pid:
            return
        argv = args[1]
        if isinstance(argv, str | bytes):
            argv = [argv]
        kind = kind_of(list(argv or []))
        if kind is not None and kind not in self.seen:
            self.seen[kind] = " ".join(map(str, argv))[:160]
